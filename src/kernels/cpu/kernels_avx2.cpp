// AVX2 + FMA + F16C kernels: dequantizers and the dot-product tile (8 lanes). Everything
// after the target pragma is in an anonymous namespace (see kernels_avx512.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/dispatch.h"
#include "tensor/block_layouts.h"
#include "tensor/quant.h"

// clang ignores GCC target pragmas; it has its own form of the same thing.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace brisk {
namespace {

struct V {
  __m256 lo, hi;
};
using Acc = __m256;
inline V cvt_u8(__m128i bytes, int offset, float scale) {
  __m256i off = _mm256_set1_epi32(offset);
  __m256 s = _mm256_set1_ps(scale);
  __m256i a = _mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), off);
  __m256i b = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)), off);
  return {_mm256_mul_ps(_mm256_cvtepi32_ps(a), s), _mm256_mul_ps(_mm256_cvtepi32_ps(b), s)};
}
inline V cvt_u8_min(__m128i bytes, float scale, float min) {
  __m256 s = _mm256_set1_ps(scale), m = _mm256_set1_ps(min);
  __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
  __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(bytes, 8)));
  return {_mm256_sub_ps(_mm256_mul_ps(s, a), m), _mm256_sub_ps(_mm256_mul_ps(s, b), m)};
}
inline V cvt_i8(__m128i bytes, float scale) {
  __m256 s = _mm256_set1_ps(scale);
  __m256 a = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
  __m256 b = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes, 8)));
  return {_mm256_mul_ps(a, s), _mm256_mul_ps(b, s)};
}
inline void store(float* dst, V v) {
  _mm256_storeu_ps(dst, v.lo);
  _mm256_storeu_ps(dst + 8, v.hi);
}
// Two 8-lane steps in k order, as the dot tile accumulates: acc = w * x + acc.
inline void fma_acc(Acc& acc, V w, const float* x) {
  acc = _mm256_fmadd_ps(w.lo, _mm256_loadu_ps(x), acc);
  acc = _mm256_fmadd_ps(w.hi, _mm256_loadu_ps(x + 8), acc);
}
inline Acc zero_acc() { return _mm256_setzero_ps(); }
inline float hsum8(__m256 v);
inline float reduce(Acc a) { return hsum8(a); }
inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }
inline V cvt_f16(const uint16_t* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
}
inline V cvt_bf16(const uint16_t* p) {
  __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(b, 16))};
}
void f16_row(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
}
void bf16_row(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(v, 16));
  }
  for (; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}

#include "kernels/cpu/dequant_simd.inc"

inline V zero_v() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline V fma_v(V w, float x, V acc) {
  const __m256 b = _mm256_set1_ps(x);
  return {_mm256_fmadd_ps(w.lo, b, acc.lo), _mm256_fmadd_ps(w.hi, b, acc.hi)};
}
// A V is two ymm registers, and there are 16: 2 groups for one token, else 1 group and up
// to 4 tokens (8 accumulator registers).
constexpr int p16_groups(int64_t nt) { return nt == 1 ? 2 : 1; }
constexpr int p16_tile_tokens(int g) { return g == 1 ? 4 : 1; }
#include "kernels/cpu/packed16_dot.inc"

inline float hsum8(__m256 v) {  // fixed order: halves, then pairs, then the last two
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// NR rows x NT tokens, one 8-lane accumulator each; the k tail (< 8) is a masked step.
template <int NR, int NT>
void micro(const float* w, int64_t ldw, const float* x, int64_t ldx, int64_t k, float* y,
           int64_t ldy) {
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    for (int t = 0; t < NT; ++t) {
      __m256 xv = _mm256_loadu_ps(x + t * ldx + i);
      for (int r = 0; r < NR; ++r)
        acc[r][t] = _mm256_fmadd_ps(_mm256_loadu_ps(w + r * ldw + i), xv, acc[r][t]);
    }
  }
  if (i < k) {
    alignas(32) static const int32_t ones[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    __m256i m = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ones + 8 - (k - i)));
    for (int t = 0; t < NT; ++t) {
      __m256 xv = _mm256_maskload_ps(x + t * ldx + i, m);
      for (int r = 0; r < NR; ++r)
        acc[r][t] = _mm256_fmadd_ps(_mm256_maskload_ps(w + r * ldw + i, m), xv, acc[r][t]);
    }
  }
  for (int t = 0; t < NT; ++t)
    for (int r = 0; r < NR; ++r) y[t * ldy + r] = hsum8(acc[r][t]);
}

constexpr int kNR = 4, kNT = 3;
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

#include "kernels/cpu/packed_dot_avx2.inc"

namespace lanes8 {
typedef float vlane __attribute__((vector_size(32)));
#include "kernels/cpu/swiglu_lanes.inc"
#include "kernels/cpu/argmax_lanes.inc"
#include "kernels/cpu/exp_shifted_lanes.inc"
}  // namespace lanes8

// vcvtps2ph with an explicit round-to-nearest-even (MXCSR not consulted) matches
// fp32_to_fp16 bit for bit; the tail goes through it.
void to_f16_avx2(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

}  // namespace
}  // namespace brisk

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace brisk {

void fill_avx2_kernels(KernelTable& t) {
  t.swiglu = lanes8::swiglu_lanes;
  t.argmax = lanes8::argmax_lanes;
  t.exp_shifted = lanes8::exp_shifted_lanes;
  t.to_f16 = to_f16_avx2;
  fill_dequant(t);
  t.packed16_dot[static_cast<int>(DType::F16)] = packed16_dot<false>;
  t.packed16_dot[static_cast<int>(DType::BF16)] = packed16_dot<true>;
  t.dot_tile = dot_tile;
  t.quantize_act = quantize_act_avx2;
  t.packed_dot[static_cast<int>(DType::Q8_0)] = packed_dot_avx2<AQ8_0>;
  t.packed_dot[static_cast<int>(DType::Q4_0)] = packed_dot_avx2<AQ4_0>;
  t.packed_dot[static_cast<int>(DType::Q4_K)] = packed_dot_k_avx2<Q4KTiles>;
  t.packed_dot[static_cast<int>(DType::Q6_K)] = packed_dot_k_avx2<Q6KTiles>;
}

}  // namespace brisk
