// Causal GQA attention on the CPU. One task = one token and one KV head: the query heads
// that share that KV head (the GQA group) are scored together, so each K and V row is read
// once per group instead of once per query head. Tasks are independent, and each task's
// arithmetic order is fixed, so results do not depend on the number of threads.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "util/thread_pool.h"

namespace brisk {
namespace {

// Sixteen independent partial sums: without -ffast-math the compiler may not reorder a
// single running sum, but it does vectorize independent lanes.
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
  float s = 0;
  for (; i < n; ++i) s += a[i] * b[i];
  for (int j = 0; j < 16; ++j) s += acc[j];
  return s;
}

inline void axpy(float w, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += w * x[i];
}

}  // namespace

void attention(const float* q, int64_t n_tokens, const int32_t* pos,
               const KvSeqView* const* kv, const AttentionShape& s, float* out) {
  const int64_t d = s.head_dim, group = s.n_head / s.n_head_kv;
  // Causal work grows with the position, so contiguous ranges of tasks would leave the
  // thread with the first tokens idle; instead lane c takes tasks c, c + lanes, c + 2 lanes...
  ThreadPool& pool = ThreadPool::global();
  const int64_t n_tasks = n_tokens * s.n_head_kv;
  const int64_t lanes = std::min<int64_t>(pool.size(), n_tasks);
  pool.parallel_for(lanes, [&](int64_t lane_begin, int64_t lane_end, int) {
    thread_local std::vector<float> scores;  // [group, n_pos] for the current task
    for (int64_t lane = lane_begin; lane < lane_end; ++lane)
    for (int64_t task = lane; task < n_tasks; task += lanes) {
      const int64_t t = task / s.n_head_kv, g = task % s.n_head_kv;
      const int64_t n_pos = int64_t{pos[t]} + 1;
      const KvSeqView& c = *kv[t];
      if (scores.size() < static_cast<size_t>(group * n_pos)) scores.resize(group * n_pos);
      const float* qg = q + (t * s.n_head + g * group) * d;  // the group's query heads

      for (int64_t p = 0; p < n_pos; ++p) {
        const float* k = c.k(p) + g * d;
        for (int64_t r = 0; r < group; ++r) scores[r * n_pos + p] = dot(qg + r * d, k, d) * s.scale;
      }
      // softmax per query head; the 1/sum is folded into the weights before V is summed
      for (int64_t r = 0; r < group; ++r) {
        float* w = scores.data() + r * n_pos;
        const float max = *std::max_element(w, w + n_pos);
        float sum = 0;
        for (int64_t p = 0; p < n_pos; ++p) sum += (w[p] = std::exp(w[p] - max));
        const float inv = 1.0f / sum;
        for (int64_t p = 0; p < n_pos; ++p) w[p] *= inv;
      }
      float* og = out + (t * s.n_head + g * group) * d;
      std::fill(og, og + group * d, 0.0f);
      for (int64_t p = 0; p < n_pos; ++p) {
        const float* v = c.v(p) + g * d;
        for (int64_t r = 0; r < group; ++r) axpy(scores[r * n_pos + p], v, og + r * d, d);
      }
    }
  });
}

}  // namespace brisk
