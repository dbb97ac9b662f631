// SMC-SD: sequential Monte Carlo speculative decoding (arXiv 2604.15672), an opt-in
// APPROXIMATE mode (`--spec smc --draft MODEL`). Instead of rejecting a draft at its first
// unlikely token and rolling back, N particles each draft k tokens with the draft model
// (sampled from its distribution q), the target scores all N x (k + 1) positions in one
// ragged forward pass, each particle's log-weight grows by sum(log p - log q) over its
// guesses, a (k+1)-th token is drawn from the target's p, and the population is resampled
// (systematic resampling) when the effective sample size drops below N/2. Nothing is
// rolled back: every step adds k + 1 tokens. The output is the heaviest particle at the
// end. Its distribution only approaches the target's as N grows, so its quality cost is
// measured (docs/benchmarks.md). The paper's exact weighting and resampling schedule are
// not public in our notes; this is the generic SMC reading of its abstract.
// Needs temperature > 0 (greedy leaves nothing to weigh) and the CPU model (it copies K/V
// between cache slots on resampling).
#pragma once
#include <string>

#include "engine/generator.h"
#include "engine/loaded_model.h"

namespace brisk {

class SmcDecoder {
 public:
  // Throws brisk::Error when the draft's vocabulary differs, particles < 1 or k < 1.
  SmcDecoder(Model& target, const Tokenizer& tokenizer, const std::string& draft_path, int particles,
             int k, int64_t n_ctx);

  // Like Generator::generate (no streaming: the winning particle is known at the end).
  // timings: decode_steps = target passes, drafted = guesses per particle, accepted = 0.
  GenerateResult generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt);

  int resamples() const { return resamples_; }  // of the last generate()

 private:
  Model& target_;
  const Tokenizer& tok_;
  LoadedModel draft_;
  int n_, k_;
  KvCache tcache_, dcache_;  // 2N slots each: the particles live in one bank of N at a time
  int resamples_ = 0;
};

}  // namespace brisk
