#include "kv/kv_cache.h"

#include "util/error.h"

namespace brisk {

KvCache::KvCache(const KvCacheShape& s) : shape_(s) {
  if (s.n_layer <= 0 || s.n_seq <= 0 || s.n_ctx <= 0 || s.n_head_kv <= 0 || s.head_dim <= 0 ||
      s.block_size < 0 || s.n_blocks < 0)
    fail("KV cache: invalid shape (n_layer {}, n_seq {}, n_ctx {}, n_head_kv {}, head_dim {}, "
         "block_size {}, n_blocks {})",
         s.n_layer, s.n_seq, s.n_ctx, s.n_head_kv, s.head_dim, s.block_size, s.n_blocks);
  block_size_ = s.block_size > 0 ? s.block_size : s.n_ctx;
  blocks_per_seq_ = (s.n_ctx + block_size_ - 1) / block_size_;
  n_blocks_ = s.n_blocks > 0 ? s.n_blocks : s.n_seq * blocks_per_seq_;
  const size_t n = static_cast<size_t>(s.n_layer * n_blocks_ * block_size_ * row_size());
  k_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
  length_.assign(static_cast<size_t>(s.n_seq), 0);
  tables_.assign(static_cast<size_t>(s.n_seq * blocks_per_seq_), -1);
  block_ptrs_.assign(static_cast<size_t>(s.n_layer * s.n_seq * 2 * blocks_per_seq_), nullptr);
  views_.resize(static_cast<size_t>(s.n_layer * s.n_seq));
  for (int64_t l = 0; l < s.n_layer; ++l) {
    for (int64_t q = 0; q < s.n_seq; ++q) {
      const size_t i = static_cast<size_t>(l * s.n_seq + q);
      const float** kp = &block_ptrs_[2 * i * blocks_per_seq_];
      views_[i] = KvSeqView{kp, kp + blocks_per_seq_, block_size_, row_size()};
    }
  }
  if (!managed()) {  // static: slot q owns blocks q * blocks_per_seq ...
    for (int64_t q = 0; q < s.n_seq; ++q)
      for (int64_t j = 0; j < blocks_per_seq_; ++j)
        set_block(q, j, static_cast<int32_t>(q * blocks_per_seq_ + j));
  }
}

size_t KvCache::block_offset(int64_t layer, int64_t block) const {
  return static_cast<size_t>((layer * n_blocks_ + block) * block_size_ * row_size());
}

void KvCache::check_seq(int64_t seq) const {
  if (seq < 0 || seq >= shape_.n_seq)
    fail("KV cache: sequence slot {} out of range (cache has {} slots)", seq, shape_.n_seq);
}

int64_t KvCache::length(int64_t seq) const {
  check_seq(seq);
  return length_[static_cast<size_t>(seq)];
}

void KvCache::check_write(int64_t seq, int64_t pos, int64_t length_before) const {
  check_seq(seq);
  if (pos < 0) fail("KV cache: negative position {} for sequence {}", pos, seq);
  if (pos >= shape_.n_ctx)
    fail("KV cache: position {} of sequence {} exceeds the cache capacity of {} positions",
         pos, seq, shape_.n_ctx);
  if (pos > length_before)
    fail("KV cache: position {} of sequence {} would leave a hole (positions {}..{} not written)",
         pos, seq, length_before, pos - 1);
  if (tables_[static_cast<size_t>(seq * blocks_per_seq_ + pos / block_size_)] < 0)
    fail("KV cache: position {} of sequence {} has no block assigned", pos, seq);
}

float* KvCache::k_row(int64_t layer, int64_t seq, int64_t pos) {
  const int32_t b = tables_[static_cast<size_t>(seq * blocks_per_seq_ + pos / block_size_)];
  return k_.data() + block_offset(layer, b) + (pos % block_size_) * row_size();
}
float* KvCache::v_row(int64_t layer, int64_t seq, int64_t pos) {
  const int32_t b = tables_[static_cast<size_t>(seq * blocks_per_seq_ + pos / block_size_)];
  return v_.data() + block_offset(layer, b) + (pos % block_size_) * row_size();
}

float* KvCache::block_k(int64_t layer, int32_t block) {
  if (block < 0 || block >= n_blocks_) fail("KV cache: block {} out of range", block);
  return k_.data() + block_offset(layer, block);
}
float* KvCache::block_v(int64_t layer, int32_t block) {
  if (block < 0 || block >= n_blocks_) fail("KV cache: block {} out of range", block);
  return v_.data() + block_offset(layer, block);
}

void KvCache::set_length(int64_t seq, int64_t n) {
  check_seq(seq);
  if (n < 0 || n > shape_.n_ctx) fail("KV cache: length {} out of range [0, {}]", n, shape_.n_ctx);
  length_[static_cast<size_t>(seq)] = n;
}

const KvSeqView& KvCache::view(int64_t layer, int64_t seq) const {
  check_seq(seq);
  return views_[static_cast<size_t>(layer * shape_.n_seq + seq)];
}

void KvCache::truncate(int64_t seq, int64_t n) {
  check_seq(seq);
  if (n < 0) fail("KV cache: cannot truncate sequence {} to negative length {}", seq, n);
  int64_t& len = length_[static_cast<size_t>(seq)];
  if (n < len) len = n;
}

void KvCache::set_block(int64_t seq, int64_t index, int32_t block) {
  check_seq(seq);
  if (index < 0 || index >= blocks_per_seq_)
    fail("KV cache: block index {} out of range (a slot has {} blocks)", index, blocks_per_seq_);
  if (block < -1 || block >= n_blocks_)
    fail("KV cache: block {} out of range (the pool has {} blocks)", block, n_blocks_);
  tables_[static_cast<size_t>(seq * blocks_per_seq_ + index)] = block;
  for (int64_t l = 0; l < shape_.n_layer; ++l) {
    const size_t base = static_cast<size_t>((l * shape_.n_seq + seq) * 2 * blocks_per_seq_);
    block_ptrs_[base + index] = block < 0 ? nullptr : k_.data() + block_offset(l, block);
    block_ptrs_[base + blocks_per_seq_ + index] =
        block < 0 ? nullptr : v_.data() + block_offset(l, block);
  }
}

int32_t KvCache::block(int64_t seq, int64_t index) const {
  check_seq(seq);
  if (index < 0 || index >= blocks_per_seq_)
    fail("KV cache: block index {} out of range (a slot has {} blocks)", index, blocks_per_seq_);
  return tables_[static_cast<size_t>(seq * blocks_per_seq_ + index)];
}

void KvCache::reset_slot(int64_t seq) {
  check_seq(seq);
  for (int64_t j = 0; j < blocks_per_seq_; ++j) set_block(seq, j, -1);
  length_[static_cast<size_t>(seq)] = 0;
}

}  // namespace brisk
