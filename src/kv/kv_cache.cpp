#include "kv/kv_cache.h"

#include <algorithm>

#include "kv/kv_codec.h"
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

  // Every layer's codec and eviction budget: the same for all, or a plan's.
  EvictionSpec ev = parse_eviction(s.kv_evict);
  layer_.assign(static_cast<size_t>(s.n_layer), Layer{s.kv_type, 0, 0, 0, ev.budget});
  if (ev.policy == "plan") {
    const KvPlan plan = s.plan ? *s.plan : read_kv_plan(ev.plan_file);
    if (s.kv_type != KvType::f32)
      fail("--kv-type {} with --kv-evict {}: the plan sets every layer's KV type (leave "
           "--kv-type out)", kv_type_name(s.kv_type), s.kv_evict);
    if (static_cast<int64_t>(plan.layers.size()) != s.n_layer)
      fail("KV plan '{}' has {} layers, the model {}", ev.plan_file, plan.layers.size(),
           s.n_layer);
    ev.policy = "none";  // unless a layer keeps less than everything
    for (int64_t l = 0; l < s.n_layer; ++l) {
      const KvLayerOption& o = plan.layers[static_cast<size_t>(l)];
      layer_[static_cast<size_t>(l)].type = o.type;
      layer_[static_cast<size_t>(l)].budget = TokenBudget{o.keep, 0};
      if (o.keep < 1) ev.policy = plan.policy;
    }
  }
  size_t total = 0;
  for (Layer& L : layer_) {
    L.head_bytes = kv_head_bytes(L.type, s.head_dim);
    L.row_bytes = s.n_head_kv * L.head_bytes;
    L.base = total;
    total += static_cast<size_t>(n_blocks_ * block_size_ * L.row_bytes);
  }
  // On 2 MiB pages, like the weights: a decode step touches every running sequence's
  // blocks in every layer, on 4 KiB pages a TLB miss each (16 sequences of brisk-tiny:
  // decode attention 10% faster, the step 4%). Touched here, as a zero-filled vector was:
  // a page first written during decoding stalls that step (zeroing 2 MiB).
  k_ = HugePageBuffer(total);
  v_ = HugePageBuffer(total);
  for (size_t i = 0; i < total; i += 4096) k_.data()[i] = v_.data()[i] = 0;
  bool kivi = false;
  for (const Layer& L : layer_) kivi |= L.type == KvType::kivi4;
  if (kivi) {
    // Its K groups span kKiviGroup positions of one block (so a full block, the unit the
    // prefix cache shares, holds only complete, quantized groups), and eviction would move
    // single positions out of their group.
    if (blocks_per_seq_ > 1 && block_size_ % kKiviGroup != 0)
      fail("KV type kivi4 needs blocks of a multiple of {} positions, got {} (--block-size)",
           kKiviGroup, block_size_);
    if (ev.policy != "none")
      fail("KV type kivi4 cannot be combined with token eviction (--kv-evict {}): its K is "
           "quantized per group of {} positions", s.kv_evict, kKiviGroup);
    residual_.assign(static_cast<size_t>(s.n_layer * s.n_seq * kKiviResidual * row_size()), 0.0f);
    kivi_exact_from_.assign(static_cast<size_t>(s.n_layer * s.n_seq), 0);
  }
  length_.assign(static_cast<size_t>(s.n_seq), 0);
  removed_.assign(static_cast<size_t>(s.n_layer * s.n_seq), 0);
  compacted_.assign(static_cast<size_t>(s.n_seq), 0);
  if (ev.policy != "none") {
    evict_ = make_token_eviction(ev, s.n_layer, s.n_seq, s.n_head_kv);
    if (!evict_) fail("--kv-evict {}: unknown eviction policy '{}'", s.kv_evict, ev.policy);
  }
  tables_.assign(static_cast<size_t>(s.n_seq * blocks_per_seq_), -1);
  block_ptrs_.assign(static_cast<size_t>(s.n_layer * s.n_seq * 2 * blocks_per_seq_), nullptr);
  views_.resize(static_cast<size_t>(s.n_layer * s.n_seq));
  for (int64_t l = 0; l < s.n_layer; ++l) {
    for (int64_t q = 0; q < s.n_seq; ++q) {
      const size_t i = static_cast<size_t>(l * s.n_seq + q);
      const float** kp = &block_ptrs_[2 * i * blocks_per_seq_];
      const Layer& L = layer_[static_cast<size_t>(l)];
      const int64_t stride = L.type == KvType::f32 ? row_size() : L.row_bytes;
      views_[i] = KvSeqView{kp, kp + blocks_per_seq_, block_size_, stride, L.type};
      if (L.type == KvType::kivi4) {
        views_[i].k_residual = residual(l, q, 0);
        views_[i].residual_stride = row_size();
      }
    }
  }
  if (!managed()) {  // static: slot q owns blocks q * blocks_per_seq ...
    for (int64_t q = 0; q < s.n_seq; ++q)
      for (int64_t j = 0; j < blocks_per_seq_; ++j)
        set_block(q, j, static_cast<int32_t>(q * blocks_per_seq_ + j));
  }
}

int64_t KvCache::bytes_per_token() const {
  int64_t sum = 0;
  for (const Layer& L : layer_) sum += 2 * L.row_bytes;
  return sum;
}

size_t KvCache::block_offset(int64_t layer, int64_t block) const {
  const Layer& L = layer_[static_cast<size_t>(layer)];
  return L.base + static_cast<size_t>(block * block_size_ * L.row_bytes);
}

size_t KvCache::slot_offset(int64_t layer, int64_t seq, int64_t s) const {
  const int32_t b = tables_[static_cast<size_t>(seq * blocks_per_seq_ + s / block_size_)];
  return block_offset(layer, b) + static_cast<size_t>((s % block_size_) * row_bytes(layer));
}

size_t KvCache::row_offset(int64_t layer, int64_t seq, int64_t pos) const {
  return slot_offset(layer, seq, slot(layer, seq, pos));
}

void KvCache::decode_k(int64_t layer, int64_t seq, int64_t s, int64_t g, float* out) const {
  const Layer& L = layer_[static_cast<size_t>(layer)];
  const int64_t d = shape_.head_dim;
  if (L.type != KvType::kivi4) {
    decode_kv_head(L.type, k_.data() + slot_offset(layer, seq, s) + g * L.head_bytes, d, out);
  } else if (s >= view(layer, seq).k_quantized) {
    const float* r = view(layer, seq).k_residual + (s % kKiviResidual) * row_size() + g * d;
    std::copy_n(r, d, out);
  } else {
    const size_t group = slot_offset(layer, seq, s - s % kKiviGroup) + g * kivi_k_group_bytes(d);
    decode_kivi_k(k_.data() + group, s % kKiviGroup, d, out);
  }
}

void KvCache::decode_v(int64_t layer, int64_t seq, int64_t s, int64_t g, float* out) const {
  const Layer& L = layer_[static_cast<size_t>(layer)];
  decode_kv_head(L.type, v_.data() + slot_offset(layer, seq, s) + g * L.head_bytes,
                 shape_.head_dim, out);
}

// kivi4 K: the row goes to the exact residual; a group it completes is quantized into its
// block. Rewriting a position below the quantized ones (a rollback) reopens its group: the
// rows before it are still exact in the residual if it was the last group closed (a
// speculative rollback), else they come back decoded.
void KvCache::store_kivi_k(int64_t layer, int64_t seq, int64_t pos, const float* k) {
  const size_t i = static_cast<size_t>(layer * shape_.n_seq + seq);
  KvSeqView& v = views_[i];
  int64_t& exact_from = kivi_exact_from_[i];
  const int64_t d = shape_.head_dim, first = pos - pos % kKiviGroup;
  if (pos < v.k_quantized) {
    if (first < exact_from) {
      for (int64_t p = first; p < pos; ++p)
        for (int64_t g = 0; g < shape_.n_head_kv; ++g)
          decode_k(layer, seq, p, g, residual(layer, seq, p % kKiviResidual) + g * d);
      exact_from = first;
    }
    v.k_quantized = first;
  }
  // This row overwrites the one kKiviResidual positions back.
  exact_from = std::max(exact_from, pos + 1 - kKiviResidual);
  std::copy_n(k, row_size(), residual(layer, seq, pos % kKiviResidual));
  if (pos % kKiviGroup != kKiviGroup - 1) return;
  uint8_t* out = k_.data() + slot_offset(layer, seq, first);
  const float* rows = residual(layer, seq, first % kKiviResidual);
  for (int64_t g = 0; g < shape_.n_head_kv; ++g)
    encode_kivi_k(rows + g * d, row_size(), d, out + g * kivi_k_group_bytes(d));
  v.k_quantized = pos + 1;
}

void KvCache::observe(int64_t layer, int64_t seq, const float* q, int64_t n_q, int64_t first_pos,
                      int64_t n_head, bool sampled) {
  if (!evict_ || n_q == 0) return;
  const int64_t first_slot = slot(layer, seq, first_pos);
  const EvictionInput in{*this, layer, seq, q, n_q, n_head, first_slot, first_slot + n_q};
  evict_->observe(in);
  if (!sampled && evict_->waits_for_sampling()) return;
  const int64_t adaptive = evict_->adaptive_budget(in);
  const int64_t budget =
      adaptive >= 1 ? adaptive : layer_[static_cast<size_t>(layer)].budget.of(first_pos + n_q);
  if (in.n_slots <= budget) return;
  evict_->select(in, budget, keep_);
  compact(layer, seq, keep_);
  removed_[static_cast<size_t>(layer * shape_.n_seq + seq)] += in.n_slots - budget;
  compacted_[static_cast<size_t>(seq)] =
      std::max(compacted_[static_cast<size_t>(seq)], first_pos + n_q);
}

void KvCache::compact(int64_t layer, int64_t seq, const std::vector<std::vector<int64_t>>& keep) {
  const int64_t head_bytes = layer_[static_cast<size_t>(layer)].head_bytes;
  for (int64_t g = 0; g < shape_.n_head_kv; ++g) {
    const std::vector<int64_t>& k = keep[static_cast<size_t>(g)];
    for (size_t i = 0; i < k.size(); ++i) {
      if (k[i] == static_cast<int64_t>(i)) continue;  // ascending: slot i <= k[i], no overlap
      const size_t from = slot_offset(layer, seq, k[i]) + g * head_bytes;
      const size_t to = slot_offset(layer, seq, static_cast<int64_t>(i)) + g * head_bytes;
      std::copy_n(k_.data() + from, head_bytes, k_.data() + to);
      std::copy_n(v_.data() + from, head_bytes, v_.data() + to);
    }
  }
}

void KvCache::check_f32(const char* what) const {
  for (const Layer& L : layer_)
    if (L.type != KvType::f32)
      fail("KV cache: {} needs an f32 cache, this one stores {}", what, kv_type_name(L.type));
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
  if (pos < compacted(seq))
    fail("KV cache: position {} of sequence {} was compacted by token eviction and cannot be "
         "rewritten (clear the sequence first)", pos, seq);
  if (pos > length_before)
    fail("KV cache: position {} of sequence {} would leave a hole (positions {}..{} not written)",
         pos, seq, length_before, pos - 1);
  int64_t max_slot = 0;  // the block table is indexed by slot
  for (int64_t l = 0; l < shape_.n_layer; ++l) max_slot = std::max(max_slot, slot(l, seq, pos));
  if (max_slot >= shape_.n_ctx)
    fail("KV cache: position {} of sequence {} exceeds the cache capacity of {} positions",
         pos, seq, shape_.n_ctx);
  if (tables_[static_cast<size_t>(seq * blocks_per_seq_ + max_slot / block_size_)] < 0)
    fail("KV cache: position {} of sequence {} has no block assigned", pos, seq);
}

void KvCache::store(int64_t layer, int64_t seq, int64_t pos, const float* k, const float* v) {
  uint8_t* kd = k_.data() + row_offset(layer, seq, pos);
  uint8_t* vd = v_.data() + row_offset(layer, seq, pos);
  const int64_t d = shape_.head_dim;
  const Layer& L = layer_[static_cast<size_t>(layer)];
  for (int64_t h = 0; h < shape_.n_head_kv; ++h) {
    if (L.type != KvType::kivi4) encode_kv_head(L.type, k + h * d, d, kd + h * L.head_bytes);
    encode_kv_head(L.type, v + h * d, d, vd + h * L.head_bytes);
  }
  if (L.type == KvType::kivi4) store_kivi_k(layer, seq, pos, k);
}

float* KvCache::k_row(int64_t layer, int64_t seq, int64_t pos) {
  check_f32("k_row");
  return reinterpret_cast<float*>(k_.data() + row_offset(layer, seq, pos));
}
float* KvCache::v_row(int64_t layer, int64_t seq, int64_t pos) {
  check_f32("v_row");
  return reinterpret_cast<float*>(v_.data() + row_offset(layer, seq, pos));
}

float* KvCache::block_k(int64_t layer, int32_t block) {
  check_f32("block_k");
  if (block < 0 || block >= n_blocks_) fail("KV cache: block {} out of range", block);
  return reinterpret_cast<float*>(k_.data() + block_offset(layer, block));
}
float* KvCache::block_v(int64_t layer, int32_t block) {
  check_f32("block_v");
  if (block < 0 || block >= n_blocks_) fail("KV cache: block {} out of range", block);
  return reinterpret_cast<float*>(v_.data() + block_offset(layer, block));
}

void KvCache::set_length(int64_t seq, int64_t n) {
  check_seq(seq);
  if (n < 0 || (!evict_ && n > shape_.n_ctx))
    fail("KV cache: length {} out of range [0, {}]", n, shape_.n_ctx);
  length_[static_cast<size_t>(seq)] = n;
  start_kivi_groups(seq, n);
}

// A length at a group boundary means complete groups below it: quantized in the blocks,
// either just written or a cached prefix's shared blocks (the serving engine sets a new
// sequence's length to its prefix hit), never the residual of the slot's last occupant.
void KvCache::start_kivi_groups(int64_t seq, int64_t n) {
  if (residual_.empty() || n % kKiviGroup != 0) return;
  for (int64_t l = 0; l < shape_.n_layer; ++l) {
    const size_t i = static_cast<size_t>(l * shape_.n_seq + seq);
    if (views_[i].k_quantized != n) kivi_exact_from_[i] = n;  // a jump: nothing below is in the residual
    views_[i].k_quantized = n;
  }
}

const KvSeqView& KvCache::view(int64_t layer, int64_t seq) const {
  check_seq(seq);
  return views_[static_cast<size_t>(layer * shape_.n_seq + seq)];
}

void KvCache::truncate(int64_t seq, int64_t n) {
  check_seq(seq);
  if (n < 0) fail("KV cache: cannot truncate sequence {} to negative length {}", seq, n);
  int64_t& len = length_[static_cast<size_t>(seq)];
  if (n == 0 && compacted(seq) > 0) {  // eviction state goes with the contents
    for (int64_t l = 0; l < shape_.n_layer; ++l) removed_[static_cast<size_t>(l * shape_.n_seq + seq)] = 0;
    compacted_[static_cast<size_t>(seq)] = 0;
  } else if (n < compacted(seq) && n < len) {
    fail("KV cache: cannot roll sequence {} back to {} positions: token eviction compacted "
         "its first {}", seq, n, compacted(seq));
  }
  if (n == 0 && evict_) evict_->on_clear(seq);
  if (n < len) len = n;
  start_kivi_groups(seq, len);
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
    // Coded blocks are handed to attention as bytes behind a float pointer (KvSeqView).
    block_ptrs_[base + index] =
        block < 0 ? nullptr : reinterpret_cast<const float*>(k_.data() + block_offset(l, block));
    block_ptrs_[base + blocks_per_seq_ + index] =
        block < 0 ? nullptr : reinterpret_cast<const float*>(v_.data() + block_offset(l, block));
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
  truncate(seq, 0);  // also forgets what eviction removed
}

int64_t KvCache::max_slots(int64_t seq, int64_t positions) const {
  check_seq(seq);
  int64_t least_removed = positions;
  for (int64_t l = 0; l < shape_.n_layer; ++l)
    least_removed = std::min(least_removed, removed_[static_cast<size_t>(l * shape_.n_seq + seq)]);
  return positions - least_removed;
}

}  // namespace brisk
