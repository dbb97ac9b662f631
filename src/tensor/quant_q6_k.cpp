// Q6_K: 256-value super-blocks of 16 sub-blocks of 16, x ~ d * sc * (q - 32) with signed
// 8-bit sub-block scales sc and 6-bit q.
#include <cmath>

#include "tensor/block_layouts.h"
#include "tensor/quant.h"
#include "tensor/quant_types.h"

namespace brisk::quant_detail {

void dequantize_q6_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    float d = fp16_to_fp32(b[i].d);
    float* y = dst + i * kQK_K;
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int half = 0; half < 2; ++half) {
      // Each 128-element half: element l (+32, +64, +96) takes its low nibble from
      // ql[l] / ql[l+32] (low, low, high, high) and its top 2 bits from qh[l] bits 0,2,4,6.
      for (int l = 0; l < 32; ++l) {
        int is = l / 16;
        int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

namespace {

// Symmetric fit x ~ s*L, L in [-nmax, nmax-1], weighted by x^2: tries inverse scales that
// map the largest-magnitude value near -nmax and refits s by least squares for each.
float fit_scale_sym(const float* x, int n, int nmax) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  if (amax < 1e-30f) return 0;
  float best_s = max / -nmax, best_err = INFINITY;
  for (int step = -9; step <= 9; ++step) {
    float iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    float sxl = 0, sll = 0;
    for (int i = 0; i < n; ++i) {
      int l = round_int(iscale * x[i]);
      l = l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l);
      float w = x[i] * x[i];
      sxl += w * x[i] * static_cast<float>(l);
      sll += w * static_cast<float>(l * l);
    }
    if (sll <= 0) continue;
    float s = sxl / sll, err = 0;
    for (int i = 0; i < n; ++i) {
      int l = round_int(x[i] / s);
      l = l < -nmax ? -nmax : (l > nmax - 1 ? nmax - 1 : l);
      float e = x[i] - s * static_cast<float>(l);
      err += x[i] * x[i] * e * e;
    }
    if (err < best_err) best_err = err, best_s = s;
  }
  return best_s;
}

}  // namespace

void quantize_q6_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    BlockQ6_K& blk = b[i];
    float scales[16], max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = fit_scale_sym(x + 16 * j, 16, 32);
      if (std::fabs(scales[j]) > amax) amax = std::fabs(scales[j]), max_scale = scales[j];
    }
    uint8_t L[256] = {};
    if (amax == 0) {
      for (auto& v : blk.scales) v = 0;
      blk.d = 0;
      for (uint8_t& l : L) l = 32;
    } else {
      // The largest scale maps to -128, using the extra negative level of int8. The
      // sub-block scales are rounded against d as stored, since fp16 rounding of d (coarse
      // when d is subnormal, as it is for small weights) would otherwise bias them all.
      blk.d = fp32_to_fp16(max_scale / -128.0f);
      float ds = fp16_to_fp32(blk.d);
      for (int j = 0; j < 16; ++j) {
        int s = ds != 0 ? round_int(scales[j] / ds) : 0;
        blk.scales[j] = static_cast<int8_t>(s > 127 ? 127 : (s < -128 ? -128 : s));
      }
      float d = fp16_to_fp32(blk.d);
      for (int j = 0; j < 16; ++j) {
        float ds = d * blk.scales[j];
        for (int l = 0; l < 16; ++l) {
          int q = ds != 0 ? round_int(x[16 * j + l] / ds) : 0;
          q = q < -32 ? -32 : (q > 31 ? 31 : q);
          L[16 * j + l] = static_cast<uint8_t>(q + 32);
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = blk.ql + 64 * h;
      uint8_t* qh = blk.qh + 32 * h;
      const uint8_t* Lh = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((Lh[l] & 0x0F) | ((Lh[l + 64] & 0x0F) << 4));
        ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0x0F) | ((Lh[l + 96] & 0x0F) << 4));
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                     ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

}  // namespace brisk::quant_detail
