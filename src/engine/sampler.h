// Sampler: logits -> next token. Logit biases and penalties first, then greedy (temperature 0) or
// top-k -> temperature -> softmax -> top-p -> min-p -> a draw from the seeded generator.
// The draw uses only the seed and the logits, so the same seed and settings give the
// same tokens whatever the thread count.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace brisk {

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy (argmax)
  int top_k = 40;            // <= 0: whole vocabulary
  float top_p = 0.95f;       // 1: off
  float min_p = 0.05f;       // 0: off; keeps tokens with p >= min_p * p_max
  float repeat_penalty = 1.0f;     // 1: off; CTRL-style, on the last repeat_last_n tokens
  int repeat_last_n = 64;
  float frequency_penalty = 0.0f;  // OpenAI-style: logit -= count * f
  float presence_penalty = 0.0f;   // OpenAI-style: logit -= (count > 0) * p
  // OpenAI's logit_bias: (token id, bias in [-100, 100]) added to that token's logit before
  // the penalties; -100 all but bans a token, +100 all but forces it.
  std::vector<std::pair<int32_t, float>> logit_bias;
  uint64_t seed = 0;

  // Throws brisk::Error naming the parameter when a value is out of range (with n_vocab > 0,
  // also a logit bias for a token id the model does not have).
  void validate(int64_t n_vocab = 0) const;
};

// A token with its probability after all filters (for logprobs and tests).
struct TokenProb {
  int32_t id;
  float p;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `history` holds the tokens the penalties look at (prompt and generated so far).
  // `logits` is modified in place (penalties, temperature).
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);

  // The candidate set and probabilities that sample() would draw from (no draw), largest
  // logit first wherever a filter applies, else in id order.
  std::vector<TokenProb> candidates(std::span<float> logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }

  // The next number in [0, 1) of the seeded splitmix64 stream: the same on every platform
  // (speculative verification draws its acceptance tests from it).
  double next_uniform();

 private:
  // candidates(), into `out`; `ordered`: largest logit first wherever a filter applies
  // (otherwise in id order, which the draw does not mind). Without any filter at a
  // temperature it returns true and fills nothing: every token is a candidate, with its
  // softmax weight in this thread's scratch and their total in *whole_sum.
  bool candidates_into(std::span<float> logits, std::span<const int32_t> history, bool ordered,
                       std::vector<TokenProb>& out, double* whole_sum);
  // Logit biases, then the penalties.
  void adjust_logits(std::span<float> logits, std::span<const int32_t> history) const;

  SamplingParams params_;
  uint64_t state_;
};

int32_t argmax(std::span<const float> logits);

// The token whose cumulative probability first exceeds u (u in [0, 1)); the last one when
// rounding leaves u beyond the total.
int32_t draw(std::span<const TokenProb> dist, double u);

}  // namespace brisk
