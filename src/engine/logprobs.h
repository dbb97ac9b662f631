// Log-probabilities for the OpenAI `logprobs` field: log-softmax of the model's raw logits
// (before penalties, temperature and truncation), the chosen token's and the top N.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace brisk {

// log(sum(exp(logits))), computed stably in double.
double log_sum_exp(std::span<const float> logits);

// The chosen token's log-probability, and the top_n most likely tokens (descending; ties
// by lower id) into `top` when top_n > 0.
float token_logprobs(std::span<const float> logits, int32_t chosen, int top_n,
                     std::vector<TokenLogprob>& top);

}  // namespace brisk
