// The key/value cache: for every layer and sequence slot, the K and V vectors of each
// position already processed, so a decode step attends over the past without recomputing it.
//
// This first version is contiguous float32: slot s of layer l holds n_ctx positions of
// n_head_kv * head_dim floats each. Attention reads it only through view() (a one-block
// KvSeqView), so paged blocks can replace the storage without touching the kernels.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"

namespace brisk {

struct KvCacheShape {
  int64_t n_layer = 0;
  int64_t n_seq = 1;    // sequence slots
  int64_t n_ctx = 0;    // positions per slot (capacity)
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
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
  int64_t row_size() const { return shape_.n_head_kv * shape_.head_dim; }  // floats per position

  // Positions 0 .. length(seq)-1 of `seq` hold valid K/V.
  int64_t length(int64_t seq) const;

  // Checks that a batch may write `pos` of `seq`: the slot exists, pos < capacity, and no
  // hole is left behind (pos <= length). Throws brisk::Error otherwise. Writing several
  // positions of one sequence in a batch is fine as long as they are checked in order of
  // position against the length they will leave (see Model::forward).
  void check_write(int64_t seq, int64_t pos, int64_t length_before) const;

  // Where the forward pass stores K/V of `pos` in `layer` (row_size() floats each).
  float* k_row(int64_t layer, int64_t seq, int64_t pos);
  float* v_row(int64_t layer, int64_t seq, int64_t pos);
  // Marks positions < n of `seq` as written (called after all layers stored them).
  void set_length(int64_t seq, int64_t n);

  // What attention reads; valid until the cache is destroyed.
  const KvSeqView& view(int64_t layer, int64_t seq) const;

  void clear(int64_t seq) { truncate(seq, 0); }
  // Drops positions >= n (speculative rollback); n greater than the length is a no-op.
  void truncate(int64_t seq, int64_t n);

 private:
  size_t offset(int64_t layer, int64_t seq, int64_t pos) const;
  void check_seq(int64_t seq) const;

  KvCacheShape shape_;
  std::vector<float> k_, v_;               // [n_layer, n_seq, n_ctx, row_size]
  std::vector<int64_t> length_;            // per sequence slot
  std::vector<const float*> block_ptrs_;   // [n_layer, n_seq, {k, v}]: one block each
  std::vector<KvSeqView> views_;           // [n_layer, n_seq]
};

}  // namespace brisk
