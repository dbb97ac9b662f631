// AVX-512 kernels (F, BW, VL, DQ + FMA, F16C): dequantizers and the dot-product tile.
// Everything after the target pragma is in an anonymous namespace so no AVX-512 code can
// be picked by the linker for a shared inline function used by portable code.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <utility>

#include "kernels/dispatch.h"
#include "tensor/block_layouts.h"
#include "tensor/quant.h"

// clang ignores GCC target pragmas; it has its own form of the same thing.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif

namespace brisk {
namespace {

using V = __m512;
using Acc = __m512;
inline V cvt_u8(__m128i bytes, int offset, float scale) {
  __m512i v = _mm512_sub_epi32(_mm512_cvtepu8_epi32(bytes), _mm512_set1_epi32(offset));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(scale));
}
inline V cvt_u8_min(__m128i bytes, float scale, float min) {
  __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes));
  return _mm512_sub_ps(_mm512_mul_ps(_mm512_set1_ps(scale), q), _mm512_set1_ps(min));
}
inline V cvt_i8(__m128i bytes, float scale) {
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)), _mm512_set1_ps(scale));
}
inline void store(float* dst, V v) { _mm512_storeu_ps(dst, v); }
// Same operand order as the dot tile: acc = w * x + acc.
inline void fma_acc(Acc& acc, V w, const float* x) { acc = _mm512_fmadd_ps(w, _mm512_loadu_ps(x), acc); }
inline Acc zero_acc() { return _mm512_setzero_ps(); }
inline float reduce(Acc a) { return _mm512_reduce_add_ps(a); }
inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }
inline V cvt_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline V cvt_bf16(const uint16_t* p) {
  __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
void f16_row(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  for (; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
}
void bf16_row(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(v, 16));
  }
  for (; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}

#include "kernels/cpu/dequant_simd.inc"

inline V zero_v() { return _mm512_setzero_ps(); }
inline V fma_v(V w, float x, V acc) { return _mm512_fmadd_ps(w, _mm512_set1_ps(x), acc); }
// Zen 5 keeps 2 FMAs of 4 cycles' latency in flight: 8 or more accumulators a tile.
constexpr int p16_groups(int64_t nt) { return nt <= 3 ? 4 : 2; }  // 4-12, or 8-16 accumulators
constexpr int p16_tile_tokens(int g) { return g == 4 ? 3 : 8; }   // at most 18 of 32 zmm
#include "kernels/cpu/packed16_dot.inc"

// NR rows x NT tokens of dot products, one 16-lane accumulator each; the k tail is a
// masked (zero-filled) step so every output sees the same sequence of operations.
template <int NR, int NT>
void micro(const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t k, float* y,
           int64_t ldy) {
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = _mm512_loadu_ps(w + r * ldw + i);
    for (int t = 0; t < NT; ++t) {
      __m512 xv = _mm512_loadu_ps(x + t * ldx + i);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  if (i < k) {
    __mmask16 m = static_cast<__mmask16>((1u << (k - i)) - 1);
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = _mm512_maskz_loadu_ps(m, w + r * ldw + i);
    for (int t = 0; t < NT; ++t) {
      __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + i);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
}

constexpr int kNR = 4, kNT = 6;
using MicroFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t);

template <int NR, int... T>
void fill_row(MicroFn* row, std::integer_sequence<int, T...>) {
  ((row[T] = micro<NR, T + 1>), ...);
}
struct MicroTable {
  MicroFn f[kNR][kNT];
  MicroTable() {
    fill_row<1>(f[0], std::make_integer_sequence<int, kNT>());
    fill_row<2>(f[1], std::make_integer_sequence<int, kNT>());
    fill_row<3>(f[2], std::make_integer_sequence<int, kNT>());
    fill_row<4>(f[3], std::make_integer_sequence<int, kNT>());
  }
};

void dot_tile(const float* w, int64_t ldw, int64_t n_rows, const float* x, int64_t ldx,
              int64_t n_tok, int64_t k, float* y, int64_t ldy) {
  static const MicroTable mt;
  for (int64_t t = 0; t < n_tok; t += kNT) {
    const int nt = static_cast<int>(n_tok - t < kNT ? n_tok - t : kNT);
    for (int64_t r = 0; r < n_rows; r += kNR) {
      const int nr = static_cast<int>(n_rows - r < kNR ? n_rows - r : kNR);
      mt.f[nr - 1][nt - 1](w + r * ldw, ldw, x + t * ldx, ldx, k, y + t * ldy + r, ldy);
    }
  }
}

namespace lanes16 {
typedef float vlane __attribute__((vector_size(64)));
#include "kernels/cpu/swiglu_lanes.inc"
#include "kernels/cpu/argmax_lanes.inc"
#include "kernels/cpu/exp_shifted_lanes.inc"
}  // namespace lanes16

// As to_f16_avx2, 16 at a time.
void to_f16_avx512(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

}  // namespace
}  // namespace brisk

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

// The 8-bit activation kernels need VNNI (vpdpbusd) on top of the base AVX-512 set.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#endif
namespace brisk {
namespace {
#include "kernels/cpu/packed_dot_avx512.inc"
}  // namespace
}  // namespace brisk
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace brisk {

void fill_avx512_kernels(KernelTable& t) {
  t.swiglu = lanes16::swiglu_lanes;
  t.argmax = lanes16::argmax_lanes;
  t.exp_shifted = lanes16::exp_shifted_lanes;
  t.to_f16 = to_f16_avx512;
  fill_dequant(t);
  t.packed16_dot[static_cast<int>(DType::F16)] = packed16_dot<false>;
  t.packed16_dot[static_cast<int>(DType::BF16)] = packed16_dot<true>;
  t.dot_tile = dot_tile;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512vnni")) {  // else the AVX2 kernels stay
    t.quantize_act = quantize_act_avx512;
    t.packed_dot[static_cast<int>(DType::Q8_0)] = packed_dot_vnni<VQ8_0>;
    t.packed_dot[static_cast<int>(DType::Q4_0)] = packed_dot_vnni<VQ4_0>;
    t.packed_dot[static_cast<int>(DType::Q4_K)] = packed_dot_k_vnni<Q4KMicro>;
    t.packed_dot[static_cast<int>(DType::Q6_K)] = packed_dot_k_vnni<Q6KMicro>;
  }
}

}  // namespace brisk
