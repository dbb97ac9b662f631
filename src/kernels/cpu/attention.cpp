// Causal GQA attention on the CPU. One task = a tile of consecutive tokens of one sequence
// (up to ~32 query rows) and one KV head: all query heads of the tile that share that KV
// head are scored together, so each K and V row is read once per tile instead of once per
// query head and token. A lone decode token with a long past splits into segment tasks
// instead, each of several KV heads. Tasks are independent and each task's arithmetic
// order is fixed, so results do not depend on the number of threads. The task body (attention_task.inc)
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

// The task bodies of one instruction set.
struct AttentionIsa {
  void (*tile)(const float*, int64_t, const KvSeqView&, int64_t, int64_t, int64_t, int64_t,
               int64_t, float, float*, float*, float*);
  void (*segment)(const float*, const KvSeqView&, int64_t, int64_t, int64_t, int64_t, int64_t, float,
                  int64_t, int64_t, float*, float*, int64_t, float*);
  void (*merge)(const float*, int64_t, KvType, int64_t, int64_t, float*, float*);
};

#define BRISK_DECLARE_ATTENTION_ISA(ns)                                                        \
  namespace ns {                                                                               \
  void attend_tile(const float*, int64_t, const KvSeqView&, int64_t, int64_t, int64_t, int64_t, \
                   int64_t, float, float*, float*, float*);                                    \
  void attend_segment(const float*, const KvSeqView&, int64_t, int64_t, int64_t, int64_t, int64_t, \
                      float, int64_t, int64_t, float*, float*, int64_t, float*);               \
  void merge_segments(const float*, int64_t, KvType, int64_t, int64_t, float*, float*);        \
  }
BRISK_DECLARE_ATTENTION_ISA(attention_avx2)
BRISK_DECLARE_ATTENTION_ISA(attention_avx512)
#undef BRISK_DECLARE_ATTENTION_ISA

static AttentionIsa attention_for(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return {attention_avx512::attend_tile, attention_avx512::attend_segment, attention_avx512::merge_segments};
    case Isa::avx2:
      return {attention_avx2::attend_tile, attention_avx2::attend_segment, attention_avx2::merge_segments};
    case Isa::scalar: break;
  }
  return {attention_scalar::attend_tile, attention_scalar::attend_segment, attention_scalar::merge_segments};
}

namespace {
// Brings the K and V rows a task will read (its KV head, up to kPrefetchPositions) toward the
// core while the task before it computes. A decode task's rows lie in a few 16-position
// blocks scattered over the pool, and each block began with a miss the hardware prefetcher
// could not foresee: with 16 sequences of brisk-tiny decoding, attention's hottest
// instructions were the first loads of each block's rows. Into L1 when both fit in half of it, else into L2.
// Measured in session 20 (calls alternated with and without, 2 threads, Zen 5): attention
// of 16 decodes at 8-136 positions 9-12% less time, at 128-256 positions 5-6% less.
constexpr int64_t kPrefetchPositions = 512;
void prefetch_head_rows(const KvSeqView& c, int64_t g, int64_t n_pos, int64_t d) {
  if (c.type == KvType::kivi4) return;  // its K is stored by groups of positions
  const bool f32 = c.type == KvType::f32;
  const int64_t row_bytes = f32 ? c.row_stride * 4 : c.row_stride;
  const int64_t len = f32 ? d * 4 : kv_head_bytes(c.type, d);
  const int64_t n = std::min(n_pos, kPrefetchPositions);
  const bool into_l1 = 2 * n * len <= 24 * 1024;
  for (int64_t p0 = 0, b = 0; p0 < n; p0 += c.block_size, ++b) {  // block by block: no division a row
    const char* k = reinterpret_cast<const char*>(c.k_blocks[b]) + g * len;
    const char* v = reinterpret_cast<const char*>(c.v_blocks[b]) + g * len;
    const int64_t rows = std::min(c.block_size, n - p0);
    for (int64_t j = 0; j < rows; ++j, k += row_bytes, v += row_bytes)
      for (int64_t l = 0; l < len; l += 64) {
        if (into_l1) {
          __builtin_prefetch(k + l, 0, 3);
          __builtin_prefetch(v + l, 0, 3);
        } else {
          __builtin_prefetch(k + l, 0, 2);
          __builtin_prefetch(v + l, 0, 2);
        }
      }
  }
}

struct Tile {
  int64_t t0, m;  // batch tokens t0 .. t0+m-1
  int64_t n_seg;  // > 1: a single token whose positions split into segment tasks
  int64_t part0;  // its first partial in the split scratch, per KV head: part0 + g * n_seg
  int64_t ng;     // KV heads per task: of a segment task, several; of a whole tile, 1
};
struct Task {
  int64_t tile, g, seg;  // KV heads g .. g + tile's ng - 1; seg < 0: the whole tile
};
}  // namespace

void attention(const float* q, int64_t n_tokens, const int32_t* pos,
               const KvSeqView* const* kv, const AttentionShape& s, float* out) {
  using attention_scalar::kSegment;
  const int64_t d = s.head_dim, group = s.n_head / s.n_head_kv;
  const AttentionIsa fn = attention_for(active_isa());

  // Tiles: runs of batch tokens of the same sequence at consecutive positions (a prefill
  // chunk), at most ~32 query rows each so the scratch stays small. A single token with a
  // long past is split into segments of kSegment positions (flash-decoding), so one
  // long decode still keeps every thread busy; the split depends only on the position.
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
    tiles.push_back({t, 1, 1, 0, 1});
  }
  ThreadPool& pool = ThreadPool::global();
  int64_t n_parts = 0;
  std::vector<Task> tasks;
  std::vector<int64_t> first_task(tiles.size() + 1);  // tile i: tasks [first_task[i], first_task[i + 1])
  for (size_t i = 0; i < tiles.size(); ++i) {
    first_task[i] = static_cast<int64_t>(tasks.size());
    Tile& tile = tiles[i];
    const int64_t n_pos = pos[tile.t0] + tile.m;
    if (tile.m == 1 && n_pos > kSegment) {
      tile.n_seg = (n_pos + kSegment - 1) / kSegment;
      tile.part0 = n_parts;
      n_parts += tile.n_seg * s.n_head_kv;
    }
    if (tile.n_seg == 1) {
      for (int64_t g = 0; g < s.n_head_kv; ++g) tasks.push_back({static_cast<int64_t>(i), g, -1});
      continue;
    }
    // A segment task takes several KV heads, all of them where there are enough segments
    // to keep the threads busy: it then reads whole K and V rows (segment_partial).
    tile.ng = s.n_head_kv;
    while (tile.ng % 2 == 0 && tile.n_seg * (s.n_head_kv / tile.ng) < 2 * pool.size()) tile.ng /= 2;
    for (int64_t g = 0; g < s.n_head_kv; g += tile.ng)
      for (int64_t j = 0; j < tile.n_seg; ++j) tasks.push_back({static_cast<int64_t>(i), g, j});
  }
  first_task[tiles.size()] = static_cast<int64_t>(tasks.size());
  const int64_t part_floats = group * (d + 2);  // attention_task.inc's partial_floats(group, d)
  thread_local std::vector<float> parts;
  if (parts.size() < static_cast<size_t>(n_parts * part_floats))
    parts.resize(static_cast<size_t>(n_parts * part_floats));

  // Work goes out in units, lane c taking units c, c + lanes, c + 2 lanes... (causal work
  // grows with the position, so contiguous ranges would leave the thread with the first
  // tokens idle). With at least as many tiles as lanes, a unit is a whole tile, all its KV
  // heads: one thread then reads each of its KV blocks whole, where KV heads handed to
  // different threads had both reading alternate pieces of the same blocks (bench_attention,
  // 16 sequences x 256 positions of the 1B shape: 389 -> 272 us). Otherwise a unit
  // is one task, so a long decode's segments still spread over the threads. A few lanes
  // per thread, so that the pool can hand a descheduled thread's lanes to the others
  // (util/thread_pool.h).
  const int64_t max_lanes = 4 * pool.size(), n_tiles = static_cast<int64_t>(tiles.size());
  const bool whole_tiles = n_tiles >= max_lanes;
  const int64_t n_units = whole_tiles ? n_tiles : static_cast<int64_t>(tasks.size());
  const int64_t lanes = std::min(max_lanes, n_units);
  float* const parts_data = parts.data();
  pool.parallel_for(lanes, [&](int64_t lane_begin, int64_t lane_end, int) {
    thread_local std::vector<float> scores, og, work;  // scratch of the current task
    for (int64_t lane = lane_begin; lane < lane_end; ++lane)
      for (int64_t u = lane; u < n_units; u += lanes) {
        const int64_t t0 = whole_tiles ? first_task[u] : u, t1 = whole_tiles ? first_task[u + 1] : u + 1;
        for (int64_t ti = t0; ti < t1; ++ti) {
          const Task& task = tasks[static_cast<size_t>(ti)];
          const Tile& tile = tiles[static_cast<size_t>(task.tile)];
          const int64_t pos0 = pos[tile.t0], rows = tile.m * group * tile.ng;
          // The task this thread runs next (a whole tile's: a segment's rows start far in).
          const int64_t next = ti + 1 < t1                 ? ti + 1
                               : u + lanes >= n_units ? -1
                               : whole_tiles          ? first_task[u + lanes]
                                                      : u + lanes;
          if (next >= 0 && tasks[static_cast<size_t>(next)].seg < 0) {
            const Tile& nt = tiles[static_cast<size_t>(tasks[static_cast<size_t>(next)].tile)];
            prefetch_head_rows(*kv[nt.t0], tasks[static_cast<size_t>(next)].g, pos[nt.t0] + nt.m, d);
          }
          const size_t need_scores = static_cast<size_t>(rows * kSegment);
          const size_t need_work = static_cast<size_t>(attention_scalar::work_floats(rows, d));
          if (scores.size() < need_scores) scores.resize(need_scores);
          if (work.size() < need_work) work.resize(need_work);
          const float* qt = q + (tile.t0 * s.n_head + task.g * group) * d;
          if (task.seg >= 0) {
            const int64_t s0 = task.seg * kSegment, s1 = std::min(s0 + kSegment, pos0 + 1);
            fn.segment(qt, *kv[tile.t0], task.g, tile.ng, pos0, group, d, s.scale, s0, s1, scores.data(),
                       parts_data + (tile.part0 + task.g * tile.n_seg + task.seg) * part_floats,
                       tile.n_seg * part_floats, work.data());
            continue;
          }
          if (og.size() < static_cast<size_t>(rows * d)) og.resize(static_cast<size_t>(rows * d));
          fn.tile(qt, s.n_head * d, *kv[tile.t0], task.g, pos0, tile.m, group, d, s.scale,
                  scores.data(), og.data(), work.data());
          for (int64_t i = 0; i < tile.m; ++i)  // rows of token i: its group of heads
            std::copy(og.begin() + i * group * d, og.begin() + (i + 1) * group * d,
                      out + ((tile.t0 + i) * s.n_head + task.g * group) * d);
        }
      }
  });
  if (n_parts == 0) return;

  // The split tokens: merge each (token, KV head)'s segments in order.
  std::vector<std::pair<int64_t, int64_t>> merges;  // (tile, KV head)
  for (size_t i = 0; i < tiles.size(); ++i)
    if (tiles[i].n_seg > 1)
      for (int64_t g = 0; g < s.n_head_kv; ++g) merges.push_back({static_cast<int64_t>(i), g});
  pool.parallel_for(static_cast<int64_t>(merges.size()), [&](int64_t b, int64_t e, int) {
    thread_local std::vector<float> work;
    if (work.size() < static_cast<size_t>(part_floats)) work.resize(static_cast<size_t>(part_floats));
    for (int64_t i = b; i < e; ++i) {
      const auto [ti, g] = merges[static_cast<size_t>(i)];
      const Tile& tile = tiles[static_cast<size_t>(ti)];
      fn.merge(parts_data + (tile.part0 + g * tile.n_seg) * part_floats, tile.n_seg, kv[tile.t0]->type,
               group, d, out + (tile.t0 * s.n_head + g * group) * d, work.data());
    }
  });
}

}  // namespace brisk
