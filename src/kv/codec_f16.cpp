// f16 KV: IEEE half precision, round to nearest even (half the bytes of f32, error
// <= 2^-11 relative for normal numbers).
#include <cstring>

#include "kernels/dispatch.h"
#include "kv/kv_codec.h"
#include "tensor/quant.h"

namespace brisk::codec {

// Through the kernel table: fp32_to_fp16 one number at a time was ~6% of a 16-sequence
// brisk-tiny decode step (two rows a token a layer).
void encode_f16(const float* x, int64_t d, uint8_t* out) {
  uint16_t h[256];
  for (int64_t i = 0; i < d; i += 256) {
    const int64_t n = d - i < 256 ? d - i : 256;
    kernel_table().to_f16(x + i, n, h);
    std::memcpy(out + 2 * i, h, static_cast<size_t>(2 * n));
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
