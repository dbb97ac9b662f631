#include "engine/softmax_weights.h"

#include "kernels/dispatch.h"

namespace brisk {

double softmax_weights(std::span<const float> logits, float max, float temperature, std::vector<float>& w) {
  const size_t n = logits.size();
  w.resize(n);  // may alias logits (the sampler's top-k survivors): elementwise, so fine
  kernel_table().exp_shifted(logits.data(), static_cast<int64_t>(n), max, 1.0f / temperature, w.data());
  return sum_in_chains(n, [&](size_t i) { return w[i]; });
}

}  // namespace brisk
