// Q4_0: symmetric 4-bit levels -8..7 with one fp16 scale per 32 values.
#include <cmath>

#include "tensor/block_layouts.h"
#include "tensor/quant.h"
#include "tensor/quant_types.h"

namespace brisk::quant_detail {

void dequantize_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    float d = fp16_to_fp32(b[i].d);
    float* y = dst + i * kQK;
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0x0F) - 8) * d;
      y[j + 16] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

// The value of largest magnitude maps near level -8 (the side with one more level); a
// short search over that divisor plus a least-squares refit of d lowers the error
// noticeably against the plain max/-8 rule.
void quantize_q4_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float amax = 0, max = 0;
    for (int j = 0; j < kQK; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
    float best_d = 0, best_err = INFINITY;
    if (amax > 0) {
      for (int k = 0; k <= 12; ++k) {
        float id = (-8.0f + 0.1f * static_cast<float>(k)) / max;
        float sxl = 0, sll = 0;
        for (int j = 0; j < kQK; ++j) {
          int l = round_int(x[j] * id);
          l = l < -8 ? -8 : (l > 7 ? 7 : l);
          sxl += x[j] * static_cast<float>(l);
          sll += static_cast<float>(l * l);
        }
        if (sll == 0) continue;
        float d = fp16_to_fp32(fp32_to_fp16(sxl / sll));
        float err = 0;
        float idd = d != 0 ? 1.0f / d : 0.0f;
        for (int j = 0; j < kQK; ++j) {
          int l = round_int(x[j] * idd);
          l = l < -8 ? -8 : (l > 7 ? 7 : l);
          float e = x[j] - d * static_cast<float>(l);
          err += e * e;
        }
        if (err < best_err) best_err = err, best_d = d;
      }
    }
    b[i].d = fp32_to_fp16(best_d);
    float d = fp16_to_fp32(b[i].d);
    float id = d != 0 ? 1.0f / d : 0.0f;
    for (int j = 0; j < 16; ++j) {
      int l0 = round_int(x[j] * id), l1 = round_int(x[j + 16] * id);
      l0 = (l0 < -8 ? -8 : (l0 > 7 ? 7 : l0)) + 8;
      l1 = (l1 < -8 ? -8 : (l1 > 7 ? 7 : l1)) + 8;
      b[i].qs[j] = static_cast<uint8_t>(l0 | (l1 << 4));
    }
  }
}

}  // namespace brisk::quant_detail
