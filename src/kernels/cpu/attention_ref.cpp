// The textbook definition of causal GQA attention, one (token, head) at a time. Slow and
// obviously right: the optimized kernel in attention.cpp is tested against it.
#include <cmath>
#include <vector>

#include "kernels/attention.h"

namespace brisk {

void attention_ref(const float* q, int64_t n_tokens, const int32_t* pos,
                   const KvSeqView* const* kv, const AttentionShape& s, float* out) {
  const int64_t d = s.head_dim, group = s.n_head / s.n_head_kv;
  std::vector<float> w;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t n_pos = int64_t{pos[t]} + 1;
    w.assign(static_cast<size_t>(n_pos), 0.0f);
    for (int64_t h = 0; h < s.n_head; ++h) {
      const float* qh = q + (t * s.n_head + h) * d;
      const int64_t g = h / group;
      float max = -INFINITY;
      for (int64_t p = 0; p < n_pos; ++p) {
        const float* k = kv[t]->k(p) + g * d;
        float dot = 0;
        for (int64_t i = 0; i < d; ++i) dot += qh[i] * k[i];
        w[p] = dot * s.scale;
        max = std::max(max, w[p]);
      }
      float sum = 0;
      for (int64_t p = 0; p < n_pos; ++p) sum += (w[p] = std::exp(w[p] - max));
      float* o = out + (t * s.n_head + h) * d;
      for (int64_t i = 0; i < d; ++i) o[i] = 0;
      for (int64_t p = 0; p < n_pos; ++p) {
        const float* v = kv[t]->v(p) + g * d;
        for (int64_t i = 0; i < d; ++i) o[i] += w[p] / sum * v[i];
      }
    }
  }
}

}  // namespace brisk
