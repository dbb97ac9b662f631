// Portable kernels: reference dequantizers and a dot-product tile that mirrors the
// 16-lane accumulation of the vector paths in plain C++.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/dispatch.h"
#include "tensor/block_layouts.h"
#include "tensor/quant.h"

namespace brisk {

namespace {

template <DType T>
void dequant(const void* src, float* dst, int64_t n) {
  dequantize_row(T, src, dst, n);
}

void dot_tile_scalar(const float* w, int64_t ldw, int64_t n_rows, const float* x, int64_t ldx,
                     int64_t n_tok, int64_t k, float* y, int64_t ldy) {
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* xt = x + t * ldx;
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* wr = w + r * ldw;
      float acc[8] = {};
      int64_t i = 0;
      for (; i + 8 <= k; i += 8)
        for (int l = 0; l < 8; ++l) acc[l] += wr[i + l] * xt[i + l];
      for (; i < k; ++i) acc[i & 7] += wr[i] * xt[i];
      y[t * ldy + r] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
  }
}

// The definition of activation quantization; the vector ISAs reproduce it bit for bit.
void quantize_act_scalar(const float* x, int64_t k, int8_t* qs, float* d) {
  for (int64_t b = 0; b < k / 32; ++b, x += 32, qs += 32) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float db = amax / 127.0f, id = db != 0 ? 1.0f / db : 0.0f;
    d[b] = db;
    for (int i = 0; i < 32; ++i) qs[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
  }
}

// Packed weights (kernels/packed_matrix.h): quant byte j of row r in a block of a group.
inline uint8_t packed_byte(const uint8_t* payload, int r, int j) { return payload[64 * (j / 4) + 4 * r + j % 4]; }

// Integer dot of row r's block with 32 activations, written as the vector kernels compute
// it: unsigned stored quants times x, minus offset * sum(x) (Q4_0: q - 8; Q8_0: q + 128).
struct PackedQ4_0 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_0);
  static int32_t dot(const uint8_t* payload, int r, const int8_t* x, int32_t xsum) {
    int32_t s = -8 * xsum;
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = packed_byte(payload, r, j);
      s += (q & 0x0F) * x[j] + (q >> 4) * x[j + 16];
    }
    return s;
  }
};
struct PackedQ8_0 {
  static constexpr size_t kBlockBytes = sizeof(BlockQ8_0);
  static int32_t dot(const uint8_t* payload, int r, const int8_t* x, int32_t xsum) {
    int32_t s = -128 * xsum;
    for (int j = 0; j < 32; ++j) s += packed_byte(payload, r, j) * x[j];
    return s;
  }
};

// y[t * ldy + r] = row_dot(group of row r, r % 16, t) for the rows and tokens of a packed
// matrix (kernels/packed_matrix.h).
template <class RowDot>
void for_each_packed_row(const uint8_t* w, size_t group_bytes, int64_t n_rows, int64_t n_tok,
                         float* y, int64_t ldy, RowDot row_dot) {
  for (int64_t r0 = 0; r0 < n_rows; r0 += 16)
    for (int r = 0; r < 16 && r0 + r < n_rows; ++r)
      for (int64_t t = 0; t < n_tok; ++t) y[t * ldy + r0 + r] = row_dot(w + (r0 / 16) * group_bytes, r, t);
}

// acc = fma(float(isum), d_w * d_x, acc), block after block: bit for bit the vector lanes.
template <class P>
void packed_dot_scalar(const uint8_t* w, size_t group_bytes, int64_t n_rows, const int8_t* xq,
                       const float* xd, const int32_t* xs, int64_t n_tok, int64_t k, float* y,
                       int64_t ldy) {
  const int64_t nb = k / 32;
  for_each_packed_row(w, group_bytes, n_rows, n_tok, y, ldy, [&](const uint8_t* group, int r, int64_t t) {
    float acc = 0;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = group + b * 16 * P::kBlockBytes;
      uint16_t d;
      std::memcpy(&d, blk + 2 * r, 2);
      const int32_t isum = P::dot(blk + 32, r, xq + t * k + 32 * b, xs[2 * (t * nb + b)] + xs[2 * (t * nb + b) + 1]);
      acc = std::fma(static_cast<float>(isum), fp16_to_fp32(d) * xd[t * nb + b], acc);
    }
    return acc;
  });
}

// Packed F16/BF16: acc = fma(w[c], x[c], acc), column after column (dispatch.h: Packed16DotFn),
// each column converted once for up to 8 tokens.
template <bool kBf16>
[[gnu::always_inline]] inline void packed16_dot_body(const uint8_t* w, size_t group_bytes, int64_t n_rows,
                                                     const float* x, int64_t n_tok, int64_t k, float* y, int64_t ldy) {
  for (int64_t r0 = 0; r0 < n_rows; r0 += 16) {
    const uint8_t* group = w + (r0 / 16) * group_bytes;
    const int nr = static_cast<int>(std::min<int64_t>(16, n_rows - r0));
    for (int64_t t0 = 0; t0 < n_tok; t0 += 8) {
      const int nt = static_cast<int>(std::min<int64_t>(8, n_tok - t0));
      float acc[16][8] = {};
      for (int64_t c = 0; c < k; ++c)
        for (int r = 0; r < nr; ++r) {
          uint16_t h;
          std::memcpy(&h, group + 32 * c + 2 * r, 2);
          const float wc = kBf16 ? bf16_to_fp32(h) : fp16_to_fp32(h);
          for (int t = 0; t < nt; ++t) acc[r][t] = std::fma(wc, x[(t0 + t) * k + c], acc[r][t]);
        }
      for (int r = 0; r < nr; ++r)
        for (int t = 0; t < nt; ++t) y[(t0 + t) * ldy + r0 + r] = acc[r][t];
    }
  }
}

// An fma a weight: one instruction where the CPU has FMA (every AVX2 one), else the
// library's exact software fma (same results, much slower).
template <bool kBf16>
[[gnu::target("fma")]] void packed16_dot_scalar_fma(const uint8_t* w, size_t group_bytes, int64_t n_rows,
                                                     const float* x, int64_t n_tok, int64_t k, float* y, int64_t ldy) {
  packed16_dot_body<kBf16>(w, group_bytes, n_rows, x, n_tok, k, y, ldy);
}
template <bool kBf16>
void packed16_dot_scalar(const uint8_t* w, size_t group_bytes, int64_t n_rows, const float* x, int64_t n_tok,
                         int64_t k, float* y, int64_t ldy) {
  packed16_dot_body<kBf16>(w, group_bytes, n_rows, x, n_tok, k, y, ldy);
}

// Q4_K, per super-block of 8 sub-blocks j (one activation block each): x = d*sc_j*q -
// dmin*m_j, so dot = d * sum_j dx_j*(sc_j*isum_j) - dmin * sum_j m_j*(dx_j*xsum_j), with
//   sd = fma(float(sc_j * isum_j), dx_j, sd); sm = fma(float(m_j), dx_j * float(xsum_j), sm)
//   acc = fma(d, sd, acc); acc = fma(-dmin, sm, acc)
// (sc_j * isum_j < 2^24, so its float is exact).
void packed_dot_q4_k_scalar(const uint8_t* w, size_t group_bytes, int64_t n_rows, const int8_t* xq,
                            const float* xd, const int32_t* xs, int64_t n_tok, int64_t k, float* y,
                            int64_t ldy) {
  const int64_t nsb = k / 256, nb = k / 32;
  const size_t pbb = 16 * sizeof(BlockQ4_K) + 64;
  for_each_packed_row(w, group_bytes, n_rows, n_tok, y, ldy, [&](const uint8_t* group, int r, int64_t t) {
    float acc = 0;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* blk = group + sb * pbb;
      uint16_t d, dmin;
      std::memcpy(&d, blk + 2 * r, 2);
      std::memcpy(&dmin, blk + 32 + 2 * r, 2);
      float sd = 0, sm = 0;
      for (int j = 0; j < 8; ++j) {
        const int64_t xb = t * nb + sb * 8 + j;  // activation block
        const int8_t* x = xq + t * k + 256 * sb + 32 * j;
        int32_t isum = 0;
        for (int l = 0; l < 32; ++l) {
          const uint8_t q = packed_byte(blk + 320, r, 32 * (j / 2) + l);
          isum += ((j % 2) ? q >> 4 : q & 0x0F) * x[l];
        }
        const float dx = xd[xb];
        const int32_t xsum = xs[2 * xb] + xs[2 * xb + 1];
        sd = std::fma(static_cast<float>(blk[64 + 16 * j + r] * isum), dx, sd);
        sm = std::fma(static_cast<float>(blk[192 + 16 * j + r]), dx * static_cast<float>(xsum), sm);
      }
      acc = std::fma(fp16_to_fp32(d), sd, acc);
      acc = std::fma(-fp16_to_fp32(dmin), sm, acc);
    }
    return acc;
  });
}

// Q6_K, per activation block j of a super-block (scale groups 2j, 2j+1 of 16 values):
//   isum = sc_2j * sum (q - 32) x + sc_2j+1 * sum (q - 32) x   (exact: |isum| < 2^24)
//   acc = fma(float(isum), d * dx_j, acc)
// with q of value p = 128h + 32u + l built from ql[64h + 32(u%2) + l] (low nibble for u < 2,
// high for u >= 2) and bits 2u, 2u+1 of qh[32h + l], as GGUF defines it.
void packed_dot_q6_k_scalar(const uint8_t* w, size_t group_bytes, int64_t n_rows, const int8_t* xq,
                            const float* xd, const int32_t* xs, int64_t n_tok, int64_t k, float* y,
                            int64_t ldy) {
  const int64_t nsb = k / 256, nb = k / 32;
  const size_t pbb = 16 * sizeof(BlockQ6_K);
  for_each_packed_row(w, group_bytes, n_rows, n_tok, y, ldy, [&](const uint8_t* group, int r, int64_t t) {
    float acc = 0;
    for (int64_t sb = 0; sb < nsb; ++sb) {
      const uint8_t* blk = group + sb * pbb;
      uint16_t d;
      std::memcpy(&d, blk + 2 * r, 2);
      for (int j = 0; j < 8; ++j) {
        const int h = j / 4, u = j % 4;
        const int8_t* x = xq + t * k + sb * 256 + 32 * j;
        int32_t isum = 0;
        for (int half = 0; half < 2; ++half) {
          int32_t s = -32 * xs[(t * k + sb * 256 + 32 * j) / 16 + half];
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            const uint8_t ql = packed_byte(blk + 288, r, 64 * h + 32 * (u % 2) + l);
            const uint8_t qh = packed_byte(blk + 2336, r, 32 * h + l);
            s += ((u < 2 ? ql & 0x0F : ql >> 4) | (((qh >> (2 * u)) & 3) << 4)) * x[l];
          }
          isum += static_cast<int8_t>(blk[32 + 16 * (2 * j + half) + r]) * s;
        }
        acc = std::fma(static_cast<float>(isum), fp16_to_fp32(d) * xd[t * nb + sb * 8 + j], acc);
      }
    }
    return acc;
  });
}

namespace lanes4 {
typedef float vlane __attribute__((vector_size(16)));
#include "kernels/cpu/swiglu_lanes.inc"
#include "kernels/cpu/argmax_lanes.inc"
#include "kernels/cpu/exp_shifted_lanes.inc"
}  // namespace lanes4

void to_f16_scalar(const float* x, int64_t n, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

}  // namespace

void fill_scalar_kernels(KernelTable& t) {
  t.swiglu = lanes4::swiglu_lanes;
  t.argmax = lanes4::argmax_lanes;
  t.exp_shifted = lanes4::exp_shifted_lanes;
  t.to_f16 = to_f16_scalar;
  t.dequant[static_cast<int>(DType::F32)] = dequant<DType::F32>;
  t.dequant[static_cast<int>(DType::F16)] = dequant<DType::F16>;
  t.dequant[static_cast<int>(DType::BF16)] = dequant<DType::BF16>;
  t.dequant[static_cast<int>(DType::Q8_0)] = dequant<DType::Q8_0>;
  t.dequant[static_cast<int>(DType::Q4_0)] = dequant<DType::Q4_0>;
  t.dequant[static_cast<int>(DType::Q4_K)] = dequant<DType::Q4_K>;
  t.dequant[static_cast<int>(DType::Q6_K)] = dequant<DType::Q6_K>;
  t.dot_tile = dot_tile_scalar;
  t.quantize_act = quantize_act_scalar;
  t.packed_dot[static_cast<int>(DType::Q8_0)] = packed_dot_scalar<PackedQ8_0>;
  t.packed_dot[static_cast<int>(DType::Q4_0)] = packed_dot_scalar<PackedQ4_0>;
  t.packed_dot[static_cast<int>(DType::Q4_K)] = packed_dot_q4_k_scalar;
  t.packed_dot[static_cast<int>(DType::Q6_K)] = packed_dot_q6_k_scalar;
  __builtin_cpu_init();
  const bool fma = __builtin_cpu_supports("fma");
  t.packed16_dot[static_cast<int>(DType::F16)] = fma ? packed16_dot_scalar_fma<false> : packed16_dot_scalar<false>;
  t.packed16_dot[static_cast<int>(DType::BF16)] = fma ? packed16_dot_scalar_fma<true> : packed16_dot_scalar<true>;
}

}  // namespace brisk
