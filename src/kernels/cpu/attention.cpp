// Causal GQA attention on the CPU. One task = a tile of consecutive tokens of one sequence
// (up to ~32 query rows) and one KV head: all query heads of the tile that share that KV
// head are scored together, so each K and V row is read once per tile instead of once per
// query head and token. Tasks are independent and each task's arithmetic order is fixed,
// so results do not depend on the number of threads. The task body (attention_task.inc)
// is compiled per instruction set and picked by active_isa().
#include <algorithm>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dispatch.h"
#include "tensor/quant.h"
#include "util/thread_pool.h"

namespace brisk {

namespace attention_scalar {
#define BRISK_ATTN_LANES 4
#include "attention_task.inc"
#undef BRISK_ATTN_LANES
}  // namespace attention_scalar

using AttendFn = void (*)(const float*, int64_t, const KvSeqView&, int64_t, int64_t, int64_t,
                          int64_t, int64_t, float, float*, float*, float*);
namespace attention_avx2 {
void attend_tile(const float*, int64_t, const KvSeqView&, int64_t, int64_t, int64_t, int64_t,
                 int64_t, float, float*, float*, float*);
}
namespace attention_avx512 {
void attend_tile(const float*, int64_t, const KvSeqView&, int64_t, int64_t, int64_t, int64_t,
                 int64_t, float, float*, float*, float*);
}

static AttendFn attend_for(Isa isa) {
  switch (isa) {
    case Isa::avx512: return attention_avx512::attend_tile;
    case Isa::avx2: return attention_avx2::attend_tile;
    case Isa::scalar: break;
  }
  return attention_scalar::attend_tile;
}

namespace {
struct Tile {
  int64_t t0, m;  // batch tokens t0 .. t0+m-1
};
}  // namespace

void attention(const float* q, int64_t n_tokens, const int32_t* pos,
               const KvSeqView* const* kv, const AttentionShape& s, float* out) {
  const int64_t d = s.head_dim, group = s.n_head / s.n_head_kv;
  const AttendFn attend = attend_for(active_isa());

  // Tiles: runs of batch tokens of the same sequence at consecutive positions (a prefill
  // chunk), at most ~32 query rows each so the scratch stays small.
  const int64_t max_m = std::max<int64_t>(1, 32 / group);
  std::vector<Tile> tiles;
  for (int64_t t = 0; t < n_tokens; ++t) {
    if (!tiles.empty()) {
      Tile& last = tiles.back();
      const int64_t prev = last.t0 + last.m - 1;
      if (prev == t - 1 && last.m < max_m && kv[t] == kv[prev] && pos[t] == pos[prev] + 1) {
        ++last.m;
        continue;
      }
    }
    tiles.push_back({t, 1});
  }

  // Causal work grows with the position, so contiguous ranges of tasks would leave the
  // thread with the first tokens idle; instead lane c takes tasks c, c + lanes, c + 2 lanes...
  // A few lanes per thread, so that the pool can hand a descheduled thread's lanes to the
  // others (util/thread_pool.h).
  ThreadPool& pool = ThreadPool::global();
  const int64_t n_tasks = static_cast<int64_t>(tiles.size()) * s.n_head_kv;
  const int64_t lanes = std::min<int64_t>(4 * pool.size(), n_tasks);
  pool.parallel_for(lanes, [&](int64_t lane_begin, int64_t lane_end, int) {
    thread_local std::vector<float> scores, og, work;  // scratch of the current task
    for (int64_t lane = lane_begin; lane < lane_end; ++lane) {
      for (int64_t task = lane; task < n_tasks; task += lanes) {
        const Tile& tile = tiles[static_cast<size_t>(task / s.n_head_kv)];
        const int64_t g = task % s.n_head_kv;
        const int64_t pos0 = pos[tile.t0], rows = tile.m * group;
        if (scores.size() < static_cast<size_t>(rows * (pos0 + tile.m)))
          scores.resize(static_cast<size_t>(rows * (pos0 + tile.m)));
        if (og.size() < static_cast<size_t>(rows * d)) og.resize(static_cast<size_t>(rows * d));
        if (work.size() < static_cast<size_t>((64 + rows) * d))  // decoded rows + rotated q
          work.resize(static_cast<size_t>((64 + rows) * d));
        attend(q + (tile.t0 * s.n_head + g * group) * d, s.n_head * d, *kv[tile.t0], g, pos0,
               tile.m, group, d, s.scale, scores.data(), og.data(), work.data());
        for (int64_t i = 0; i < tile.m; ++i)  // rows of token i: its group of heads
          std::copy(og.begin() + i * group * d, og.begin() + (i + 1) * group * d,
                    out + ((tile.t0 + i) * s.n_head + g * group) * d);
      }
    }
  });
}

}  // namespace brisk
