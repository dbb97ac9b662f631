// f16 KV: IEEE half precision, round to nearest even (half the bytes of f32, error
// <= 2^-11 relative for normal numbers).
#include <cstring>

#include "kv/kv_codec.h"
#include "tensor/quant.h"

namespace brisk::codec {

void encode_f16(const float* x, int64_t d, uint8_t* out) {
  for (int64_t i = 0; i < d; ++i) {
    const uint16_t h = fp32_to_fp16(x[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void decode_f16(const uint8_t* in, int64_t d, float* out) {
  for (int64_t i = 0; i < d; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    out[i] = fp16_to_fp32(h);
  }
}

}  // namespace brisk::codec
