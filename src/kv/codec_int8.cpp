// int8 KV: symmetric round-to-nearest per group of kKvGroup numbers, scale = absmax / 127
// stored as a half. Error per number <= scale / 2 (plus the half scale's rounding).
#include <cmath>
#include <cstring>

#include "kv/kv_codec.h"
#include "tensor/quant.h"

namespace brisk::codec {

void encode_int8(const float* x, int64_t d, uint8_t* out) {
  const int64_t groups = d / kKvGroup;
  int8_t* q = reinterpret_cast<int8_t*>(out + 2 * groups);
  for (int64_t g = 0; g < groups; ++g) {
    float amax = 0;
    for (int64_t i = 0; i < kKvGroup; ++i) amax = std::fmax(amax, std::fabs(x[g * kKvGroup + i]));
    const uint16_t hs = fp32_to_fp16(amax / 127.0f);
    std::memcpy(out + 2 * g, &hs, 2);
    const float s = fp16_to_fp32(hs);  // quantize against the scale actually stored
    for (int64_t i = 0; i < kKvGroup; ++i) {
      const float v = s > 0 ? std::nearbyint(x[g * kKvGroup + i] / s) : 0.0f;
      q[g * kKvGroup + i] = static_cast<int8_t>(std::fmax(-127.0f, std::fmin(127.0f, v)));
    }
  }
}

void decode_int8(const uint8_t* in, int64_t d, float* out) {
  const int64_t groups = d / kKvGroup;
  const int8_t* q = reinterpret_cast<const int8_t*>(in + 2 * groups);
  for (int64_t g = 0; g < groups; ++g) {
    uint16_t hs;
    std::memcpy(&hs, in + 2 * g, 2);
    const float s = fp16_to_fp32(hs);
    for (int64_t i = 0; i < kKvGroup; ++i) out[g * kKvGroup + i] = s * q[g * kKvGroup + i];
  }
}

}  // namespace brisk::codec
