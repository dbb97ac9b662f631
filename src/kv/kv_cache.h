// The key/value cache: for every layer and sequence slot, the K and V vectors of each
// position already processed, so a decode step attends over the past without recomputing it.
//
// Storage is paged: a pool of fixed-size blocks, each holding block_size positions of
// K and V for every layer, each head vector encoded by its layer's KV codec (shape.kv_type:
// f32, the exact default, or a compressed type, kernels/kv_format.h; a per-layer plan,
// kv/kv_plan.h, gives every layer its own; writes go through store(), which encodes, and
// attention decodes the blocks itself). Every sequence slot has a block table:
// position p of the slot lives in block table[p / block_size] at row p % block_size.
// Attention reads K/V only through view(), a KvSeqView over that table.
//
// Two ways to use it:
//  - static (shape.n_blocks == 0, what Generator, perplexity and the CLI use): every slot
//    owns ceil(n_ctx / block_size) blocks of its own from the start (block_size 0 means one
//    block of n_ctx positions), so it behaves like a contiguous cache.
//  - managed (shape.n_blocks > 0, what the serving engine uses): the tables start empty and
//    the owner assigns pool blocks with set_block() (kv/block_pool.h does the allocation and
//    reference counting; several slots may share a block, e.g. a cached prompt prefix).
//    A write into a position whose block is not assigned is refused by check_write().
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kv/kv_plan.h"
#include "kv/token_eviction.h"
#include "util/huge_page_buffer.h"

namespace brisk {

struct KvCacheShape {
  int64_t n_layer = 0;
  int64_t n_seq = 1;    // sequence slots
  int64_t n_ctx = 0;    // positions per slot (capacity)
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t block_size = 0;  // positions per block; 0: n_ctx (one block per slot)
  int64_t n_blocks = 0;    // blocks in the pool; 0: static, n_seq * ceil(n_ctx / block_size)
  KvType kv_type = KvType::f32;  // how each head vector is stored
  std::string kv_evict = "none";  // token eviction (kv/token_eviction.h)
  // kv_evict "plan:FILE" already read (Model does so once); null: the cache reads FILE.
  std::shared_ptr<const KvPlan> plan = nullptr;
};

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);
  // Not copyable (a copy's views would point into the original). Movable: the views point
  // into heap buffers, which a vector move hands over unchanged.
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;

  const KvCacheShape& shape() const { return shape_; }
  int64_t capacity() const { return shape_.n_ctx; }
  int64_t n_seq() const { return shape_.n_seq; }
  int64_t row_size() const { return shape_.n_head_kv * shape_.head_dim; }  // numbers per position
  // Stored bytes of K (or V) per position of `layer`, and its codec (a plan varies them).
  int64_t row_bytes(int64_t layer) const { return layer_[static_cast<size_t>(layer)].row_bytes; }
  KvType kv_type(int64_t layer) const { return layer_[static_cast<size_t>(layer)].type; }
  int64_t block_size() const { return block_size_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t blocks_per_seq() const { return blocks_per_seq_; }  // table length of a slot
  bool managed() const { return shape_.n_blocks > 0; }
  size_t bytes() const { return k_.size() + v_.size(); }
  // K and V bytes one position takes over all layers (what a longer context costs).
  int64_t bytes_per_token() const;

  // Positions 0 .. length(seq)-1 of `seq` hold valid K/V.
  int64_t length(int64_t seq) const;

  // Checks that a batch may write `pos` of `seq`: the slot exists, pos < capacity, no hole
  // is left behind (pos <= length), and pos's block is assigned. Throws brisk::Error
  // otherwise. Writing several positions of one sequence in a batch is fine as long as
  // they are checked in order of position against the length they will leave (see
  // Model::forward).
  void check_write(int64_t seq, int64_t pos, int64_t length_before) const;

  // Token eviction: position `pos` of `seq` lives at slot(layer, seq, pos) = pos minus the
  // positions evicted before it in that layer; attention gets slots. In managed mode the
  // block table is indexed by slot, so the owner can free blocks past max_slots().
  bool evicting() const { return evict_ != nullptr; }
  int64_t slot(int64_t layer, int64_t seq, int64_t pos) const {
    return pos - removed_[static_cast<size_t>(layer * shape_.n_seq + seq)];
  }
  // Slots in use by `seq` in `layer` (its length minus what was evicted).
  int64_t n_slots(int64_t layer, int64_t seq) const { return slot(layer, seq, length(seq)); }
  // Slots that positions 0 .. positions-1 of `seq` take in the layer that evicted least:
  // how far into its block table the sequence reaches (the serving engine allocates and
  // frees blocks by it).
  int64_t max_slots(int64_t seq, int64_t positions) const;
  // Positions below this were compacted by eviction: they can no longer be rewritten.
  int64_t compacted(int64_t seq) const { return compacted_[static_cast<size_t>(seq)]; }
  // After layer `layer` stored and attended the batch's n_q tokens of `seq` (positions
  // first_pos.., the last ones of the sequence; q after RoPE, [n_q, n_head, head_dim]):
  // lets the policy see them and, over budget, keeps its choice of slots per KV head.
  // `sampled`: a token will be sampled after the last of them (its logits were asked for),
  // false for the chunks of a prompt before its last.
  void observe(int64_t layer, int64_t seq, const float* q, int64_t n_q, int64_t first_pos,
               int64_t n_head, bool sampled);
  // K (V) of slot `slot`, KV head g, decoded to head_dim floats (policies' scores, tests).
  void decode_k(int64_t layer, int64_t seq, int64_t slot, int64_t g, float* out) const;
  void decode_v(int64_t layer, int64_t seq, int64_t slot, int64_t g, float* out) const;

  // Stores K and V of `pos` in `layer` (row_size() floats each), encoded by the codec.
  void store(int64_t layer, int64_t seq, int64_t pos, const float* k, const float* v);
  // Where K/V of `pos` in `layer` live, f32 caches only (tests).
  float* k_row(int64_t layer, int64_t seq, int64_t pos);
  float* v_row(int64_t layer, int64_t seq, int64_t pos);
  // Marks positions < n of `seq` as written (called after all layers stored them).
  void set_length(int64_t seq, int64_t n);

  // What attention reads; valid until the cache is destroyed.
  const KvSeqView& view(int64_t layer, int64_t seq) const;

  void clear(int64_t seq) { truncate(seq, 0); }
  // Drops positions >= n (speculative rollback); n greater than the length is a no-op.
  // The blocks stay assigned (their owner frees them).
  void truncate(int64_t seq, int64_t n);

  // Managed mode: entry `index` of `seq`'s block table becomes pool block `block` (-1:
  // none). The caller keeps the length consistent (set_length) with what the blocks hold.
  void set_block(int64_t seq, int64_t index, int32_t block);
  int32_t block(int64_t seq, int64_t index) const;
  // Managed mode: the slot's table emptied, its length 0, its eviction state cleared.
  void reset_slot(int64_t seq);

  // Raw rows of pool block `block`, f32 caches only (tests).
  float* block_k(int64_t layer, int32_t block);
  float* block_v(int64_t layer, int32_t block);

 private:
  size_t block_offset(int64_t layer, int64_t block) const;  // in bytes
  size_t slot_offset(int64_t layer, int64_t seq, int64_t slot) const;
  size_t row_offset(int64_t layer, int64_t seq, int64_t pos) const;
  void compact(int64_t layer, int64_t seq, const std::vector<std::vector<int64_t>>& keep);
  void check_seq(int64_t seq) const;
  void check_f32(const char* what) const;
  void store_kivi_k(int64_t layer, int64_t seq, int64_t pos, const float* k);
  void start_kivi_groups(int64_t seq, int64_t n);
  float* residual(int64_t layer, int64_t seq, int64_t row) {
    return &residual_[static_cast<size_t>(((layer * shape_.n_seq + seq) * kKiviResidual + row) * row_size())];
  }

  KvCacheShape shape_;
  struct Layer {
    KvType type = KvType::f32;
    int64_t head_bytes = 0, row_bytes = 0;
    size_t base = 0;     // offset of the layer's blocks in k_ and v_
    TokenBudget budget;  // token eviction (with evict_)
  };
  int64_t block_size_ = 0, n_blocks_ = 0, blocks_per_seq_ = 0;
  std::vector<Layer> layer_;
  HugePageBuffer k_, v_;                  // per layer: [n_blocks, block_size, row_bytes]
  std::vector<int64_t> length_;            // per sequence slot
  std::vector<int32_t> tables_;            // [n_seq, blocks_per_seq]: pool block or -1
  std::vector<const float*> block_ptrs_;   // [n_layer, n_seq, {k, v}, blocks_per_seq]
  std::vector<KvSeqView> views_;           // [n_layer, n_seq]
  std::vector<float> residual_;            // kivi4 K: [n_layer, n_seq, kKiviResidual, row_size]
  std::vector<int64_t> kivi_exact_from_;   // kivi4 [n_layer, n_seq]: residual rows hold K exactly from here
  std::unique_ptr<TokenEvictionPolicy> evict_;
  std::vector<int64_t> removed_;           // [n_layer, n_seq]: positions evicted
  std::vector<int64_t> compacted_;         // [n_seq]
  std::vector<std::vector<int64_t>> keep_; // scratch of observe()
};

}  // namespace brisk
