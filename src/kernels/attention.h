// Causal multi-head attention with grouped KV heads (GQA) over a key/value cache.
//
// The kernel reads K and V through KvSeqView, a table of fixed-size blocks of positions:
// today's contiguous cache is a single block; a paged cache hands over its block table
// unchanged. So the kernel never learns how the cache is laid out beyond "position p of
// this sequence lives at blocks[p / block_size] + (p % block_size) * row_stride".
#pragma once
#include <cstdint>

#include "kernels/kv_format.h"

namespace brisk {

// K and V of one sequence in one layer. Each position holds n_head_kv head vectors (heads
// contiguous), each stored as `type` says (kernels/kv_format.h). row_stride is the distance
// between two positions of a block: in floats for f32, in bytes for the other types (whose
// block pointers then point to the encoded bytes; the kernel decodes them itself).
struct KvSeqView {
  const float* const* k_blocks = nullptr;
  const float* const* v_blocks = nullptr;
  int64_t block_size = 0;  // positions per block
  int64_t row_stride = 0;  // floats (f32) or bytes (other types) between consecutive positions
  KvType type = KvType::f32;
  // kivi4 only: K of positions >= k_quantized (its incomplete group) is exact here, at row
  // (position % kKiviResidual), residual_stride floats apart; below, in the blocks' K groups.
  const float* k_residual = nullptr;
  int64_t residual_stride = 0;
  int64_t k_quantized = 0;

  // f32 only:

  const float* k(int64_t pos) const {
    return k_blocks[pos / block_size] + (pos % block_size) * row_stride;
  }
  const float* v(int64_t pos) const {
    return v_blocks[pos / block_size] + (pos % block_size) * row_stride;
  }
};

struct AttentionShape {
  int64_t n_head = 0;     // query heads
  int64_t n_head_kv = 0;  // key/value heads; n_head % n_head_kv == 0
  int64_t head_dim = 0;
  float scale = 0;        // usually 1 / sqrt(head_dim)
};

// For each token t < n_tokens and query head h:
//   out[t, h] = sum_{p <= pos[t]} softmax_p(scale * q[t, h] . K_t[p, g]) * V_t[p, g]
// with g = h / (n_head / n_head_kv) and K_t, V_t = kv[t] (the sequence token t belongs to).
// q and out are [n_tokens, n_head, head_dim]; positions 0..pos[t] of kv[t] must be written.
// Multi-threaded over (token, head) on ThreadPool::global().
void attention(const float* q, int64_t n_tokens, const int32_t* pos,
               const KvSeqView* const* kv, const AttentionShape& shape, float* out);

// The plain single-threaded definition, for tests (f32 views only).
void attention_ref(const float* q, int64_t n_tokens, const int32_t* pos,
                   const KvSeqView* const* kv, const AttentionShape& shape, float* out);

}  // namespace brisk
