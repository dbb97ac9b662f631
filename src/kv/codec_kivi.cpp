// kivi4 K (KIVI, Liu et al., arXiv 2402.02750, section 3: keys have outlier channels, so
// they are quantized per channel, grouping tokens; values per token). Per channel c of a
// group of kKiviGroup rows: min and scale = (max - min) / 15 as halves, each number the
// nearest of min + j * scale; [d x (half scale, half min)][kKiviGroup rows x d / 2 bytes,
// channel 2i in the low nibble].
#include <cmath>
#include <cstring>

#include "kv/kv_codec.h"
#include "tensor/quant.h"

namespace brisk {

int64_t kivi_k_group_bytes(int64_t d) { return 4 * d + kKiviGroup * d / 2; }

void encode_kivi_k(const float* rows, int64_t stride, int64_t d, uint8_t* out) {
  uint8_t* q = out + 4 * d;
  std::memset(q, 0, static_cast<size_t>(kKiviGroup * d / 2));
  for (int64_t c = 0; c < d; ++c) {
    float lo = rows[c], hi = rows[c];
    for (int64_t r = 1; r < kKiviGroup; ++r)
      lo = std::fmin(lo, rows[r * stride + c]), hi = std::fmax(hi, rows[r * stride + c]);
    const uint16_t hs = fp32_to_fp16((hi - lo) / 15.0f), hm = fp32_to_fp16(lo);
    std::memcpy(out + 4 * c, &hs, 2);
    std::memcpy(out + 4 * c + 2, &hm, 2);
    const float s = fp16_to_fp32(hs), m = fp16_to_fp32(hm);
    for (int64_t r = 0; r < kKiviGroup; ++r) {
      const float v = s > 0 ? std::nearbyint((rows[r * stride + c] - m) / s) : 0.0f;
      const uint8_t n = static_cast<uint8_t>(std::fmax(0.0f, std::fmin(15.0f, v)));
      q[r * d / 2 + c / 2] |= static_cast<uint8_t>(n << (4 * (c & 1)));
    }
  }
}

void decode_kivi_k(const uint8_t* group, int64_t r, int64_t d, float* out) {
  const uint8_t* q = group + 4 * d + r * d / 2;
  for (int64_t c = 0; c < d; ++c) {
    uint16_t hs, hm;
    std::memcpy(&hs, group + 4 * c, 2);
    std::memcpy(&hm, group + 4 * c + 2, 2);
    const int n = (q[c / 2] >> (4 * (c & 1))) & 15;
    out[c] = static_cast<float>(n) * fp16_to_fp32(hs) + fp16_to_fp32(hm);
  }
}

}  // namespace brisk
