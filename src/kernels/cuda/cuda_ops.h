// CUDA kernels of the llama-family forward pass (Hopper, sm_90a), behind a plain C++ API
// that host code compiled by the ordinary C++ compiler can call. Every launcher enqueues
// on the given stream and returns at once; errors of the launch itself are checked
// (check_launch) and thrown as brisk::Error.
//
// Activations are float32, row-major [n_tokens, features], as on the CPU. Weights keep
// their GGUF dtype on the GPU but not the GGUF byte layout: quantized matrices are split
// into a quant array and a scale array so that every lane can read 16-byte aligned
// chunks (see DevMatrix). The KV cache stores each head vector through a KV codec
// (kernels/kv_format.h's byte layouts: f16, int8, int4, int4r, nsn2).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kernels/kv_format.h"
#include "tensor/tensor_view.h"

typedef struct cublasContext* cublasHandle_t;

namespace brisk::cuda {

// Throws brisk::Error with `what` and the CUDA error string when e != cudaSuccess.
void check(cudaError_t e, const char* what);
// The last launch error (cudaGetLastError), thrown with the kernel's name.
void check_launch(const char* kernel);

// A weight matrix on the GPU: rows x cols (rows = output features; cols = input features,
// the contiguous dimension, as in GGUF).
//   F32, F16, BF16: data = rows * cols elements, row-major.
//   Q8_0: data = rows * cols int8 quants, row-major; scales = rows * cols/32 fp16.
//   Q4_0: data = rows * cols/2 bytes: the 16 quant bytes of each GGUF block in their GGUF
//         order (byte j: element j low nibble, j + 16 high nibble); scales as Q8_0.
// Other GGUF types (Q4_K, Q6_K, ...) are dequantized at upload and stored as F16.
enum class WType : int { F32 = 0, F16 = 1, BF16 = 2, Q8_0 = 3, Q4_0 = 4 };

struct DevMatrix {
  WType type = WType::F32;
  int64_t rows = 0, cols = 0;
  void* data = nullptr;
  void* scales = nullptr;
  size_t bytes() const;  // device bytes of data + scales (what a GEMV reads)
};

const char* wtype_name(WType t);

// Uploads the row-concatenation of `parts` (same dtype and row length) as one matrix,
// repacked as above; `force_f16` stores it as F16 whatever its type. The caller frees it
// with free_matrix.
DevMatrix upload_matrix(const TensorView* const* parts, int n_parts, bool force_f16 = false);
inline DevMatrix upload_matrix(const TensorView& t) {
  const TensorView* p = &t;
  return upload_matrix(&p, 1);
}
void free_matrix(DevMatrix& m);
// The GGUF types upload_matrix keeps as they are (the rest become F16).
bool native_type(DType t);

// --- matrix products -------------------------------------------------------------
// Activations quantized for the Q8_0/Q4_0 GEMVs, T rows of `cols`: q[t * cols + k] int8,
// per block of 32: d[t * cols/32 + b] = amax / 127 and s[...] = d * sum(q of the block).
struct QuantAct {
  int8_t* q = nullptr;
  float* d = nullptr;
  float* s = nullptr;
};
// Bytes of a QuantAct of T rows of `cols`, and the QuantAct laid out in such a buffer.
size_t quant_act_bytes(int64_t cols, int T);
QuantAct quant_act_in(void* buf, int64_t cols, int T);

// y[t * ldy + r] = sum_k W[r, k] * x[t * ldx + k] for t < T, r < W.rows.
// T <= 8: hand-written GEMV (weights dequantized in registers, 16-byte loads).
// Q8_0/Q4_0 multiply int8 activations (x quantized per block of 32 with a float scale,
// as llama.cpp's MMVQ does) with dp4a: `xq` when the producer of x already quantized it
// (x is then unused), else x is quantized into `scratch` (quant_act_bytes(cols, T)).
constexpr int kMaxGemvTokens = 8;
void gemv(const DevMatrix& W, const float* x, int64_t ldx, int T, float* y, int64_t ldy,
          void* scratch, cudaStream_t s, const QuantAct* xq = nullptr);

// Any T through cuBLAS: F32 weights with SGEMM (no TF32); F16/BF16 weights directly with
// activations converted to the same type; Q8_0/Q4_0 dequantized into `wscratch` (f16,
// rows*cols elements) first. `xscratch` holds T*cols 16-bit values. fp32 accumulation.
// x16: x as its producer already wrote it in W's 16-bit type (gemm_bf16(W)); x is then not
// read and no conversion runs. Not for F32 weights.
void gemm(cublasHandle_t h, const DevMatrix& W, const float* x, int64_t T, float* y,
          int64_t ldy, void* wscratch, void* xscratch, cudaStream_t s, const uint16_t* x16 = nullptr);
// The 16-bit type gemm() reads activations in for W: bf16 for BF16 weights, else f16.
inline bool gemm_bf16(const DevMatrix& W) { return W.type == WType::BF16; }

// An activation written directly as the next GEMM's 16-bit input (f16 or bf16), instead of
// f32 plus a conversion pass.
struct Act16 {
  uint16_t* p = nullptr;
  bool bf16 = false;
};

// W dequantized/converted to 16-bit (bf16 when `bf16`, else f16), row-major.
void dequant_16(const DevMatrix& W, void* out, bool bf16, cudaStream_t s);
// x (n floats) to f16/bf16.
void to_16(const float* x, int64_t n, void* out, bool bf16, cudaStream_t s);

// --- elementwise / normalization -------------------------------------------------
// out[t, :] = row ids[t] of W (any WType), T rows of W.cols floats.
void embed_rows(const DevMatrix& W, const int32_t* ids, int T, float* out, cudaStream_t s);
// If d: x += d. Then, if w: out = x / sqrt(mean(x^2) + eps) * w, rows of n (n % 32 == 0,
// n <= 16384), and out quantized into *qout when qout (n = the consumer's cols).
// With out16 (and w), out is written as 16-bit into *out16 instead.
void add_rmsnorm(float* x, const float* d, const float* w, int64_t rows, int64_t n, float eps,
                 float* out, cudaStream_t s, const QuantAct* qout = nullptr, const Act16* out16 = nullptr);
// out[r, :] = x[idx[r], :], n floats a row.
void gather_rows(const float* x, const int32_t* idx, int rows, int64_t n, float* out,
                 cudaStream_t s);
// act[t, i] = silu(gu[t, i]) * gu[t, F + i]   (gu = [gate | up] per token; F % 32 == 0);
// with qout, act is written quantized into *qout instead; with out16, as 16-bit into *out16.
void swiglu(const float* gu, int64_t T, int64_t F, float* act, cudaStream_t s, const QuantAct* qout = nullptr,
            const Act16* out16 = nullptr);

// --- attention -------------------------------------------------------------------
struct AttnDims {
  int n_head = 0, n_head_kv = 0, head_dim = 0;
  int64_t n_ctx = 0;    // positions per sequence slot in the cache
  float eps = 1e-5f;    // q/k norm epsilon
  bool neox = false;    // RoPE pairs (i, i + d/2) instead of (2i, 2i+1)
};
// The KV cache of one layer: [n_seq][n_head_kv][n_ctx] head vectors of row_bytes each, K and
// V, every vector in `type`'s byte layout (kernels/kv_format.h; the CPU encoders' bytes).
// f32 is stored as f16 (the GPU's exact-enough default); kivi4 is not supported.
struct LayerKv {
  uint8_t* k = nullptr;
  uint8_t* v = nullptr;
  KvType type = KvType::f16;
  int64_t row_bytes = 0;            // kv_row_bytes_of(type, head_dim)
  const float* codebook = nullptr;  // nsn2: nsn2_codebook() on the GPU
};
// Bytes of one head vector on the GPU: kv_head_bytes(type, head_dim), f32 counted as f16.
int64_t kv_row_bytes_of(KvType t, int head_dim);
// Throws brisk::Error when the GPU cannot store `kv.type` at this head_dim (or row_bytes is off).
void check_kv(const LayerKv& kv, const AttnDims& d);

// qkv = [T][q_dim + 2 kv_dim] (q | k | v per token): adds the biases (optional), applies
// the per-head q/k RMSNorm (optional, qwen3), RoPE at pos[t] with inv_freq (head_dim/2),
// writes q (scaled by nothing) to q_out [T][q_dim] f32 (and to q16 as f16 when non-null)
// and K/V, encoded, into the cache at (seq[t], pos[t]). int4r, nsn2: q, K and V are rotated
// (R x, kv_format.h) first; attention_decode un-rotates its output.
void qkv_post(const float* qkv, int T, const AttnDims& d, const float* bq, const float* bk,
              const float* bv, const float* q_norm, const float* k_norm, const float* inv_freq,
              const int32_t* pos, const int32_t* seq, float* q_out, uint16_t* q16, LayerKv kv,
              cudaStream_t s);

// qkv_post's work for one token (T = 1) in the qkv GEMV itself, W = [wq; wk; wv] (x, scratch
// and xq as for gemv): with llama-style RoPE the pair (2i, 2i+1) is the row pair one warp of
// the GEMV sums, so the lane holding the two sums rotates them and writes q to q_out and K
// and V into the f16 cache at (seq[0], pos[0]), one launch less a decode step; V equal bit for
// bit to gemv + qkv_post, q and K up to the last bit of the rotation (fused multiply-adds).
// Only where qkv_rope_fusable (no biases or q/k norm, not neox, an f16 or f32 cache);
// qkv_post serves the rest.
bool qkv_rope_fusable(const AttnDims& d, KvType kv, bool bias_or_qk_norm);
void gemv_qkv_rope(const DevMatrix& W, const float* x, void* scratch, const QuantAct* xq, const AttnDims& d,
                   const float* inv_freq, const int32_t* pos, const int32_t* seq, float* q_out, LayerKv kv,
                   cudaStream_t s);

// Split-K flash decoding over the cache, any ragged set of tokens: token t (sequence
// seq[t]) attends to positions 0..pos[t]. `part` holds T * n_head * n_split * (head_dim+2)
// floats. out = [T][q_dim] f32; with qout (head_dim % 32 == 0) written quantized instead.
// K/V are dequantized in registers as they are read (no dequantized copy); for int4r / nsn2 q is
// the rotated query qkv_post wrote and out is un-rotated. n_split in [1, 32].
int attention_splits(int T, const AttnDims& d, int n_sm);
void attention_decode(const float* q, int T, const int32_t* pos, const int32_t* seq,
                      const AttnDims& d, LayerKv kv, float scale, int n_split, float* part,
                      float* out, cudaStream_t s, const QuantAct* qout = nullptr);

// Causal attention of n consecutive tokens of one sequence (positions p0 .. p0+n-1,
// their K/V already in the f16 cache; each attends to positions 0 .. its own) on tensor
// cores, fused (FlashAttention-2: no score matrix in memory). q16 = [n][q_dim] f16; out
// rows [n][ldo] f32, head h at h * head_dim. head_dim 64 or 128 (prefill_attention_supported),
// f16 (f32) caches only: other runs go through attention_decode.
bool prefill_attention_supported(int head_dim);
void attention_prefill(const uint16_t* q16, int n, int p0, int seq, const AttnDims& d, LayerKv kv, float scale,
                       float* out, int64_t ldo, cudaStream_t s);

}  // namespace brisk::cuda
