// int4 KV (KIVI, arXiv 2402.02750: asymmetric 4-bit groups): per group of kKvGroup
// numbers, min and scale = (max - min) / 15 as halves, each number the nearest of
// min + j * scale, j = 0..15. int4r uses the same layout on the rotated vector.
#include <cmath>
#include <cstring>

#include "kv/kv_codec.h"
#include "tensor/quant.h"

namespace brisk::codec {

void encode_int4(const float* x, int64_t d, uint8_t* out) {
  const int64_t groups = d / kKvGroup;
  uint8_t* q = out + 4 * groups;
  for (int64_t g = 0; g < groups; ++g) {
    const float* xg = x + g * kKvGroup;
    float lo = xg[0], hi = xg[0];
    for (int64_t i = 1; i < kKvGroup; ++i) lo = std::fmin(lo, xg[i]), hi = std::fmax(hi, xg[i]);
    const uint16_t hs = fp32_to_fp16((hi - lo) / 15.0f), hm = fp32_to_fp16(lo);
    std::memcpy(out + 4 * g, &hs, 2);
    std::memcpy(out + 4 * g + 2, &hm, 2);
    const float s = fp16_to_fp32(hs), m = fp16_to_fp32(hm);
    for (int64_t i = 0; i < kKvGroup; i += 2) {
      uint8_t b = 0;
      for (int64_t e = 0; e < 2; ++e) {
        const float v = s > 0 ? std::nearbyint((xg[i + e] - m) / s) : 0.0f;
        b |= static_cast<uint8_t>(std::fmax(0.0f, std::fmin(15.0f, v))) << (4 * e);
      }
      q[(g * kKvGroup + i) / 2] = b;
    }
  }
}

void decode_int4(const uint8_t* in, int64_t d, float* out) {
  const int64_t groups = d / kKvGroup;
  const uint8_t* q = in + 4 * groups;
  for (int64_t g = 0; g < groups; ++g) {
    uint16_t hs, hm;
    std::memcpy(&hs, in + 4 * g, 2);
    std::memcpy(&hm, in + 4 * g + 2, 2);
    const float s = fp16_to_fp32(hs), m = fp16_to_fp32(hm);
    for (int64_t i = 0; i < kKvGroup; i += 2) {
      const uint8_t b = q[(g * kKvGroup + i) / 2];
      out[g * kKvGroup + i] = (b & 15) * s + m;
      out[g * kKvGroup + i + 1] = (b >> 4) * s + m;
    }
  }
}

}  // namespace brisk::codec
