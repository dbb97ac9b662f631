// Softmax weights over a vocabulary: w[i] = exp((logits[i] - max) / T) with the largest
// logit's weight exactly 1, and their sum. The sampler draws from them and the logprobs
// normalize by them; both run once a generated token over every logit.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

namespace brisk {

// at(0) + ... + at(n - 1) in eight independent chains added in a fixed order (one running
// sum of a vocabulary's numbers waits on every add).
template <class F>
double sum_in_chains(size_t n, F&& at) {
  double a[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) a[j] += at(i + j);
  for (; i < n; ++i) a[0] += at(i);
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

// `max` must be the largest logit and T > 0. The exponentials run in the kernels'
// exp_shifted (float, ~2 ulp, the same bits on every ISA), the sum in double in a fixed
// order. A NaN logit makes the sum NaN; a weight below e^-87 is ~1.6e-38 rather than 0.
double softmax_weights(std::span<const float> logits, float max, float temperature, std::vector<float>& w);

}  // namespace brisk
