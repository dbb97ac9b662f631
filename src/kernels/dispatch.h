// Run-time selection of CPU kernels by instruction set. The best ISA the CPU supports is
// used unless BRISK_ISA=scalar|avx2|avx512 (or set_isa, for tests) asks for a lower one,
// so every path can be exercised on one machine.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace brisk {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

const char* isa_name(Isa isa);
Isa best_isa();        // what this CPU can run (avx2 means AVX2 + FMA + F16C)
Isa active_isa();      // what kernels use now
void set_isa(Isa isa); // test hook: clamped to best_isa(); also overrides BRISK_ISA

// Dequantizes n elements (a multiple of the block size) of one row to float32.
using DequantFn = void (*)(const void* src, float* dst, int64_t n);

// Dot products of a tile: y[t * ldy + r] = sum_k w[r * ldw + k] * x[t * ldx + k] for
// r < n_rows, t < n_tok. Every output is accumulated in the same fixed order whatever
// n_rows and n_tok are, so results do not depend on tiling, batch size or threads.
using DotTileFn = void (*)(const float* w, int64_t ldw, int64_t n_rows, const float* x,
                           int64_t ldx, int64_t n_tok, int64_t k, float* y, int64_t ldy);

// Decode GEMV fused with dequantization: y[t * ldy + r] = dot(row r, x + t * k) for n_rows
// rows of row_bytes each and a few tokens (decode; a speculative verification pass), each
// weight block decoded once for all of them, accumulating exactly as dot_tile does over the
// dequantized rows (so the batch size never changes a token's result).
using GemvFn = void (*)(const uint8_t* w, size_t row_bytes, int64_t n_rows, const float* x,
                        int64_t k, int64_t n_tokens, float* y, int64_t ldy);

// Activations quantized to 8 bits for integer dot products with quantized weights (the
// role of ggml's q8_0 activations): per block of 32 values, d = max|x| / 127 and
// q = nearbyint(x * (1 / d)) (round half to even), so x ~ q * d. qs gets k int8, d k / 32
// floats; k % 32 == 0. Every ISA quantizes bit-identically.
using QuantizeActFn = void (*)(const float* x, int64_t k, int8_t* qs, float* d);

// Integer dot products of packed weights (kernels/packed_matrix.h: groups of 16 rows
// interleaved block by block) with 8-bit activations: y[t * ldy + r] = dot(row r, token t)
// for r < n_rows (from the first row of the group at w; group_bytes apart) and t < n_tok.
// Token t's activations are xq + t * k, its block scales xd + t * k / 32 and the sums of each
// 16 of its quantized activations xs + t * k / 16. Each row is one SIMD lane that
// accumulates block after block (e.g. Q4_0: acc = fma(float(integer dot), d_w * d_x, acc))
// with the same operations on every ISA and for any tile shape, so all ISAs, decode and
// prefill give bit-identical results (kernels_scalar.cpp spells out each type's sequence).
using PackedDotFn = void (*)(const uint8_t* w, size_t group_bytes, int64_t n_rows,
                             const int8_t* xq, const float* xd, const int32_t* xs,
                             int64_t n_tok, int64_t k, float* y, int64_t ldy);

// Float dot products of packed 16-bit weights (F16, BF16; kernels/packed_matrix.h: 16 rows
// interleaved column by column): y[t * ldy + r] = dot(row r, x + t * k) for r < n_rows (from
// the first row of the group at w; group_bytes apart) and t < n_tok. Each row is one SIMD
// lane that accumulates column after column, acc = fma(w[c], x[c], acc) from acc = 0, on
// every ISA and for any tile shape: all ISAs, decode and prefill give bit-identical results.
using Packed16DotFn = void (*)(const uint8_t* w, size_t group_bytes, int64_t n_rows, const float* x,
                               int64_t n_tok, int64_t k, float* y, int64_t ldy);

// out[i] = silu(gate[i]) * up[i], i < n (SwiGLU), bit-identical on every ISA.
using SwigluFn = void (*)(const float* gate, const float* up, int64_t n, float* out);
// The first index of the largest of x[0, n), n >= 1 (NaN never wins; with a NaN at 0, 0).
using ArgmaxFn = int32_t (*)(const float* x, int64_t n);
// out[i] = x[i] as IEEE half, rounded to nearest even: fp32_to_fp16 (tensor/quant.h) bit for
// bit, NaN, infinities and subnormals included, on every ISA (F16C's vcvtps2ph where present).
using ToF16Fn = void (*)(const float* x, int64_t n, uint16_t* out);
// out[i] = exp((x[i] - shift) * scale), i < n, for x[i] <= shift and scale > 0 (softmax
// weights at a temperature), to ~2 ulp and bit-identical on every ISA; below e^-87 it
// gives ~1.6e-38 instead of a smaller number.
using ExpShiftedFn = void (*)(const float* x, int64_t n, float shift, float scale, float* out);
struct KernelTable {
  Isa isa;
  DequantFn dequant[31];  // by ggml type id; null where the type is not supported
  GemvFn gemv[31];        // by ggml type id; null: dequantize + dot_tile instead
  DotTileFn dot_tile;
  QuantizeActFn quantize_act;
  PackedDotFn packed_dot[31];  // by ggml type id of the packed rows; null: not packable
  Packed16DotFn packed16_dot[31];  // F16 and BF16 only
  SwigluFn swiglu;
  ArgmaxFn argmax;
  ToF16Fn to_f16;
  ExpShiftedFn exp_shifted;
};

const KernelTable& kernel_table();            // for active_isa()
const KernelTable& kernel_table(Isa isa);     // isa must be <= best_isa()

// Per-ISA tables, defined in kernels/cpu/*_<isa>.cpp.
void fill_scalar_kernels(KernelTable& t);
void fill_avx2_kernels(KernelTable& t);
void fill_avx512_kernels(KernelTable& t);

}  // namespace brisk
