#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>

#include "engine/sampler.h"
#include "engine/softmax_weights.h"

namespace brisk {

double log_sum_exp(std::span<const float> logits) {
  const float mx = logits[static_cast<size_t>(argmax(logits))];
  if (!std::isfinite(mx)) return mx;  // an infinite (or a leading NaN) logit decides it
  thread_local std::vector<float> w;
  return mx + std::log(softmax_weights(logits, mx, 1.0f, w));
}

float token_logprobs(std::span<const float> logits, int32_t chosen, int top_n,
                     std::vector<TokenLogprob>& top) {
  const double lse = log_sum_exp(logits);
  top.clear();
  // The top_n largest (ties by lower id) in one pass: a token enters only past the n-th
  // best so far (NaN never does), where sorting the vocabulary's ids cost as much as the
  // rest of the step's sampling.
  const size_t n = std::min<size_t>(top_n > 0 ? static_cast<size_t>(top_n) : 0, logits.size());
  for (size_t i = 0; i < logits.size() && n > 0; ++i) {
    const float v = logits[i];
    if (!(v == v) || (top.size() == n && !(v > top.back().logprob))) continue;
    if (top.size() == n) top.pop_back();
    auto at = std::find_if(top.begin(), top.end(), [&](const TokenLogprob& t) { return v > t.logprob; });
    top.insert(at, {static_cast<int32_t>(i), v});
  }
  for (TokenLogprob& t : top) t.logprob = static_cast<float>(t.logprob - lse);
  return static_cast<float>(logits[static_cast<size_t>(chosen)] - lse);
}

}  // namespace brisk
