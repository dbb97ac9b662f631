#include "model/rope_freqs.h"

#include <cmath>

namespace brisk {

std::vector<float> rope_inv_freq(float base, int64_t head_dim, const std::vector<float>& divisors) {
  std::vector<float> f(static_cast<size_t>(head_dim / 2));
  for (size_t i = 0; i < f.size(); ++i) {
    // float32 exponent and power, as transformers computes its inv_freq buffer
    f[i] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(head_dim));
    if (!divisors.empty()) f[i] /= divisors[i];
  }
  return f;
}

}  // namespace brisk
