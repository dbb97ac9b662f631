// Q8_0: symmetric 8-bit with one fp16 scale per 32 values.
#include <cmath>

#include "tensor/block_layouts.h"
#include "tensor/quant.h"
#include "tensor/quant_types.h"

namespace brisk::quant_detail {

void dequantize_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    float d = fp16_to_fp32(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void quantize_q8_0(const float* src, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    float d = amax / 127.0f;
    float id = d != 0 ? 1.0f / d : 0.0f;
    b[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) {
      int q = round_int(x[j] * id);
      b[i].qs[j] = static_cast<int8_t>(q > 127 ? 127 : (q < -127 ? -127 : q));
    }
  }
}

}  // namespace brisk::quant_detail
