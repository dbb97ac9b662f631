// Causal GQA attention on the CPU. One task = one token and one KV head: the query heads
// that share that KV head (the GQA group) are scored together, so each K and V row is read
// once per group instead of once per query head. Tasks are independent, and each task's
// arithmetic order is fixed, so results do not depend on the number of threads. The task
// body (attention_task.inc) is compiled per instruction set and picked by active_isa().
#include <algorithm>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dispatch.h"
#include "util/thread_pool.h"

namespace brisk {

namespace attention_scalar {
#define BRISK_ATTN_LANES 4
#include "attention_task.inc"
#undef BRISK_ATTN_LANES
}  // namespace attention_scalar

using AttendFn = void (*)(const float*, const KvSeqView&, int64_t, int64_t, int64_t, int64_t,
                          float, float*, float*);
namespace attention_avx2 {
void attend_group(const float*, const KvSeqView&, int64_t, int64_t, int64_t, int64_t, float, float*, float*);
}
namespace attention_avx512 {
void attend_group(const float*, const KvSeqView&, int64_t, int64_t, int64_t, int64_t, float, float*, float*);
}

static AttendFn attend_for(Isa isa) {
  switch (isa) {
    case Isa::avx512: return attention_avx512::attend_group;
    case Isa::avx2: return attention_avx2::attend_group;
    case Isa::scalar: break;
  }
  return attention_scalar::attend_group;
}

void attention(const float* q, int64_t n_tokens, const int32_t* pos,
               const KvSeqView* const* kv, const AttentionShape& s, float* out) {
  const int64_t d = s.head_dim, group = s.n_head / s.n_head_kv;
  const AttendFn attend = attend_for(active_isa());
  // Causal work grows with the position, so contiguous ranges of tasks would leave the
  // thread with the first tokens idle; instead lane c takes tasks c, c + lanes, c + 2 lanes...
  ThreadPool& pool = ThreadPool::global();
  const int64_t n_tasks = n_tokens * s.n_head_kv;
  const int64_t lanes = std::min<int64_t>(pool.size(), n_tasks);
  pool.parallel_for(lanes, [&](int64_t lane_begin, int64_t lane_end, int) {
    thread_local std::vector<float> scores;  // [group, n_pos] of the current task
    for (int64_t lane = lane_begin; lane < lane_end; ++lane) {
      for (int64_t task = lane; task < n_tasks; task += lanes) {
        const int64_t t = task / s.n_head_kv, g = task % s.n_head_kv;
        const int64_t n_pos = int64_t{pos[t]} + 1;
        if (scores.size() < static_cast<size_t>(group * n_pos)) scores.resize(group * n_pos);
        attend(q + (t * s.n_head + g * group) * d, *kv[t], g, n_pos, group, d, s.scale,
               scores.data(), out + (t * s.n_head + g * group) * d);
      }
    }
  });
}

}  // namespace brisk
