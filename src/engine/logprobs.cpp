#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace brisk {

double log_sum_exp(std::span<const float> logits) {
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double s = 0;
  for (float v : logits) s += std::exp(static_cast<double>(v) - mx);
  return mx + std::log(s);
}

float token_logprobs(std::span<const float> logits, int32_t chosen, int top_n,
                     std::vector<TokenLogprob>& top) {
  const double lse = log_sum_exp(logits);
  top.clear();
  if (top_n > 0) {
    const size_t n = std::min<size_t>(static_cast<size_t>(top_n), logits.size());
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                      [&](int32_t a, int32_t b) {
                        return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
                      });
    for (size_t i = 0; i < n; ++i)
      top.push_back({ids[i], static_cast<float>(logits[ids[i]] - lse)});
  }
  return static_cast<float>(logits[static_cast<size_t>(chosen)] - lse);
}

}  // namespace brisk
