// The math of a transformer layer on float32 activations, behind one dispatch point.
// Weights may be of any supported DType; activations are float32 row-major
// [n_tokens, n]. Each op has a plain reference implementation (kernels/cpu/*_ref) and
// may have optimized ones selected at run time by CPU features.
#pragma once
#include <cstdint>

#include "tensor/tensor_view.h"

namespace brisk {

// y[t, r] = sum_k W[r, k] * x[t, k]  for t < n_tokens, r < W.ne[1]; k < W.ne[0].
// (W is [rows = out features, row length = in features], GGUF order.) Multi-threaded.
void matmul(const TensorView& W, const float* x, int64_t n_tokens, float* y);

// y_i = W_i x for n weights that read the same input (q/k/v; gate/up), each exactly as
// matmul(W_i, x, n_tokens, y_i) computes it. For one token the weights' rows are shared out
// in one parallel region (and the input quantized once), saving a thread wake-up per weight.
void matmul_multi(const TensorView* const* W, float* const* y, int n, const float* x,
                  int64_t n_tokens);

// Copies row `id` of an embedding table of any DType into out[0 .. W.ne[0]).
void get_row(const TensorView& W, int64_t id, float* out);

// out = x / sqrt(mean(x^2) + eps) * w, for each of n_tokens rows of length n.
void rmsnorm(const float* x, const float* w, int64_t n_tokens, int64_t n, float eps, float* out);

// Rotary position embedding in place on x[n_tokens, n_heads, head_dim] with per-token
// positions. inv_freq has head_dim/2 entries (scaling already applied). neox=false rotates
// pairs (2i, 2i+1) (GGUF llama); neox=true rotates pairs (i, i + head_dim/2) (HF, Qwen).
void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* pos,
          const float* inv_freq, bool neox);

// In place softmax over n values.
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, int64_t n, float* out);

}  // namespace brisk
