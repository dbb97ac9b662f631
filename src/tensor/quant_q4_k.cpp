// Q4_K: 256-value super-blocks of 8 sub-blocks of 32, each x ~ scale*q - min with q in
// [0, 15]; the 8 scales and 8 mins are themselves 6-bit multiples of fp16 d and dmin.
#include <cmath>

#include "tensor/block_layouts.h"
#include "tensor/quant.h"
#include "tensor/quant_types.h"

namespace brisk::quant_detail {

void dequantize_q4_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    float* y = dst + i * kQK_K;
    const uint8_t* q = b[i].qs;
    for (int g = 0; g < 4; ++g) {  // groups of 64: two sub-blocks share 32 bytes
      uint8_t sc, m;
      q4k_scale_min(2 * g, b[i].scales, &sc, &m);
      float d1 = d * sc, m1 = dmin * m;
      q4k_scale_min(2 * g + 1, b[i].scales, &sc, &m);
      float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0x0F) - m1;
      for (int l = 0; l < 32; ++l) y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
      y += 64;
      q += 32;
    }
  }
}

namespace {

// Fits x ~ a*L - m (m >= 0, L in [0, nmax]) for one sub-block, weighting each element by
// w; searches the level assignment over a range of candidate inverse scales and refits
// (a, m) by weighted least squares for each, keeping the lowest weighted error.
void fit_scale_min(const float* x, const float* w, int n, int nmax, float* scale, float* min) {
  float xmin = x[0], xmax = x[0];
  for (int i = 1; i < n; ++i) xmin = std::fmin(xmin, x[i]), xmax = std::fmax(xmax, x[i]);
  if (xmin > 0) xmin = 0;  // the offset only shifts down (mins are stored as >= 0)
  if (xmax <= xmin) {
    *scale = 0;
    *min = -xmin;
    return;
  }
  float best_a = (xmax - xmin) / nmax, best_b = xmin, best_err = INFINITY;
  for (int step = -2; step <= 20; ++step) {
    float iscale = (static_cast<float>(nmax) + 0.1f * static_cast<float>(step) - 1.0f) /
                   (xmax - xmin);
    float sw = 0, sl = 0, sll = 0, sx = 0, slx = 0;
    for (int i = 0; i < n; ++i) {
      int l = round_int(iscale * (x[i] - xmin));
      l = l < 0 ? 0 : (l > nmax ? nmax : l);
      float fl = static_cast<float>(l);
      sw += w[i], sl += w[i] * fl, sll += w[i] * fl * fl, sx += w[i] * x[i], slx += w[i] * fl * x[i];
    }
    float det = sw * sll - sl * sl;
    if (det <= 0) continue;
    float a = (sw * slx - sl * sx) / det, b = (sll * sx - sl * slx) / det;
    if (b > 0) {  // offset must not be positive: refit the scale alone
      b = 0;
      if (sll <= 0) continue;
      a = slx / sll;
    }
    if (a <= 0) continue;
    float err = 0;
    for (int i = 0; i < n; ++i) {
      int l = round_int((x[i] - b) / a);
      l = l < 0 ? 0 : (l > nmax ? nmax : l);
      float e = a * static_cast<float>(l) + b - x[i];
      err += w[i] * e * e;
    }
    if (err < best_err) best_err = err, best_a = a, best_b = b;
  }
  *scale = best_a;
  *min = -best_b;
}

}  // namespace

void quantize_q4_k(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    float scales[8], mins[8], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      const float* xs = x + 32 * j;
      float s2 = 0;
      for (int l = 0; l < 32; ++l) s2 += xs[l] * xs[l];
      float av = std::sqrt(s2 / 32);
      for (int l = 0; l < 32; ++l) w[l] = av + std::fabs(xs[l]);  // favour large values
      fit_scale_min(xs, w, 32, 15, &scales[j], &mins[j]);
      max_scale = std::fmax(max_scale, scales[j]);
      max_min = std::fmax(max_min, mins[j]);
    }
    BlockQ4_K& blk = b[i];
    for (uint8_t& s : blk.scales) s = 0;
    // Round the 6-bit scales and mins against d and dmin as stored (fp16 rounding of tiny
    // super-scales is coarse), clamping to the 6-bit range.
    blk.d = fp32_to_fp16(max_scale / 63.0f);
    blk.dmin = fp32_to_fp16(max_min / 63.0f);
    float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    float inv_s = d > 0 ? 1.0f / d : 0.0f, inv_m = dmin > 0 ? 1.0f / dmin : 0.0f;
    for (int j = 0; j < 8; ++j) {
      int ls = round_int(inv_s * scales[j]), lm = round_int(inv_m * mins[j]);
      ls = ls > 63 ? 63 : ls;
      lm = lm > 63 ? 63 : lm;
      if (j < 4) {
        blk.scales[j] = static_cast<uint8_t>(ls);
        blk.scales[j + 4] = static_cast<uint8_t>(lm);
      } else {
        blk.scales[j + 4] = static_cast<uint8_t>((ls & 0x0F) | ((lm & 0x0F) << 4));
        blk.scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        blk.scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
      }
    }
    uint8_t L[256];
    for (int j = 0; j < 8; ++j) {  // requantize against the scales as stored
      uint8_t sc, m;
      q4k_scale_min(j, blk.scales, &sc, &m);
      float ds = d * sc, dm = dmin * m;
      for (int l = 0; l < 32; ++l) {
        int q = ds != 0 ? round_int((x[32 * j + l] + dm) / ds) : 0;
        L[32 * j + l] = static_cast<uint8_t>(q < 0 ? 0 : (q > 15 ? 15 : q));
      }
    }
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l)
        blk.qs[32 * g + l] = static_cast<uint8_t>(L[64 * g + l] | (L[64 * g + 32 + l] << 4));
  }
}

}  // namespace brisk::quant_detail
