// nsn2 KV: 2-bit vector quantization after NSNQuant (arXiv 2505.18231). The vector arrives
// rotated (R x, coordinates close to N(0, |x|^2 / d)); it is normalized to norm sqrt(d),
// cut into sub-vectors of 8, and each is stored as its 8 signs plus the nearest magnitude
// codeword (kernels/kv_format.h: universal codebook). The scale is chosen so the decoded
// vector has the input's norm (NSNQuant renormalizes after lookup). Our simplification:
// no per-chunk mean shift (NSNQuant's middle "S" needs a chunk of tokens; we code each
// token alone, so the cache can be written one position at a time).
#include <cmath>
#include <cstring>

#include "kv/kv_codec.h"

namespace brisk::codec {

void encode_nsn2(const float* x, int64_t d, uint8_t* out) {
  const float* cb = nsn2_codebook();
  double norm2 = 0;
  for (int64_t i = 0; i < d; ++i) norm2 += static_cast<double>(x[i]) * x[i];
  const float norm = static_cast<float>(std::sqrt(norm2));
  const float to_unit = norm > 0 ? std::sqrt(static_cast<float>(d)) / norm : 0.0f;
  double code2 = 0;
  for (int64_t k = 0; k < d / kNsnSub; ++k) {
    float a[kNsnSub];
    uint8_t signs = 0;
    for (int64_t e = 0; e < kNsnSub; ++e) {
      const float v = x[k * kNsnSub + e] * to_unit;
      if (v < 0) signs |= static_cast<uint8_t>(1u << e);
      a[e] = std::fabs(v);
    }
    int64_t best = 0;
    float best_d = INFINITY;
    for (int64_t j = 0; j < kNsnCodes; ++j) {
      float dd = 0;
      for (int64_t e = 0; e < kNsnSub; ++e) {
        const float t = a[e] - cb[j * kNsnSub + e];
        dd += t * t;
      }
      if (dd < best_d) best_d = dd, best = j;
    }
    for (int64_t e = 0; e < kNsnSub; ++e)
      code2 += static_cast<double>(cb[best * kNsnSub + e]) * cb[best * kNsnSub + e];
    out[4 + 2 * k] = signs;
    out[4 + 2 * k + 1] = static_cast<uint8_t>(best);
  }
  const float scale = code2 > 0 ? static_cast<float>(norm / std::sqrt(code2)) : 0.0f;
  std::memcpy(out, &scale, 4);
}

void decode_nsn2(const uint8_t* in, int64_t d, float* out) {
  const float* cb = nsn2_codebook();
  float s;
  std::memcpy(&s, in, 4);
  for (int64_t k = 0; k < d / kNsnSub; ++k) {
    const uint8_t signs = in[4 + 2 * k];
    const float* c = cb + in[4 + 2 * k + 1] * kNsnSub;
    for (int64_t e = 0; e < kNsnSub; ++e)
      out[k * kNsnSub + e] = ((signs >> e) & 1 ? -s : s) * c[e];
  }
}

}  // namespace brisk::codec
