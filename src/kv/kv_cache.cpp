#include "kv/kv_cache.h"

#include "util/error.h"

namespace brisk {

KvCache::KvCache(const KvCacheShape& s) : shape_(s) {
  if (s.n_layer <= 0 || s.n_seq <= 0 || s.n_ctx <= 0 || s.n_head_kv <= 0 || s.head_dim <= 0)
    fail("KV cache: invalid shape (n_layer {}, n_seq {}, n_ctx {}, n_head_kv {}, head_dim {})",
         s.n_layer, s.n_seq, s.n_ctx, s.n_head_kv, s.head_dim);
  const size_t n = static_cast<size_t>(s.n_layer * s.n_seq * s.n_ctx * row_size());
  k_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
  length_.assign(static_cast<size_t>(s.n_seq), 0);
  block_ptrs_.resize(static_cast<size_t>(s.n_layer * s.n_seq * 2));
  views_.resize(static_cast<size_t>(s.n_layer * s.n_seq));
  for (int64_t l = 0; l < s.n_layer; ++l) {
    for (int64_t q = 0; q < s.n_seq; ++q) {
      const size_t i = static_cast<size_t>(l * s.n_seq + q);
      block_ptrs_[2 * i] = k_.data() + offset(l, q, 0);
      block_ptrs_[2 * i + 1] = v_.data() + offset(l, q, 0);
      views_[i] = KvSeqView{&block_ptrs_[2 * i], &block_ptrs_[2 * i + 1], s.n_ctx, row_size()};
    }
  }
}

size_t KvCache::offset(int64_t layer, int64_t seq, int64_t pos) const {
  return static_cast<size_t>(((layer * shape_.n_seq + seq) * shape_.n_ctx + pos) * row_size());
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
}

float* KvCache::k_row(int64_t layer, int64_t seq, int64_t pos) { return k_.data() + offset(layer, seq, pos); }
float* KvCache::v_row(int64_t layer, int64_t seq, int64_t pos) { return v_.data() + offset(layer, seq, pos); }

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

}  // namespace brisk
