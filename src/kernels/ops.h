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

// Rotary position embedding. The angles depend only on the position, so a forward pass
// computes them once (rope_angles) for every layer's q and k: cs[2 * (t * half + i)] and
// cs[2 * (t * half + i) + 1] get cos and sin of pos[t] * inv_freq[i], i < half = head_dim / 2
// (inv_freq: scaling already applied), evaluated in double.
void rope_angles(const int32_t* pos, int64_t n_tokens, const float* inv_freq, int64_t half, float* cs);
// Rotates x[n_tokens, n_heads, head_dim] in place by the angles cs of its tokens.
// neox=false rotates pairs (2i, 2i+1) (GGUF llama); neox=true pairs (i, i + head_dim/2) (HF, Qwen).
void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const float* cs, bool neox);

// In place softmax over n values.
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, int64_t n, float* out);

}  // namespace brisk
