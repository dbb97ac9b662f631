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
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "engine/generator.h"
#include "engine/loaded_model.h"

namespace brisk {

class SmcDecoder {
 public:
  // Throws brisk::Error when the draft's vocabulary differs, particles < 1 or k < 1.
  SmcDecoder(Model& target, const Tokenizer& tokenizer, const std::string& draft_path, int particles,
             int k, int64_t n_ctx);
  // A draft model already loaded and checked against the target's vocabulary (the serving
  // engine's shared --draft model).
  SmcDecoder(Model& target, const Tokenizer& tokenizer, std::shared_ptr<const LoadedModel> draft,
             int particles, int k, int64_t n_ctx);

  // Like Generator::generate (no streaming: the winning particle is known at the end).
  // timings: decode_steps = target passes, drafted = guesses per particle, accepted = 0.
  GenerateResult generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt);

  // The same, one target pass at a time (the serving engine interleaves them with its
  // batches): start() checks the request and prefills the prompt (throws brisk::Error),
  // step() runs one SMC step and returns false once generation is over, result() then
  // gives the heaviest particle's tokens.
  void start(const std::vector<int32_t>& prompt, const GenerateOptions& opt);
  bool step();
  GenerateResult result();

  int resamples() const { return resamples_; }  // of the last generation

 private:
  Model& target_;
  const Tokenizer& tok_;
  std::shared_ptr<const LoadedModel> draft_;
  int n_, k_;
  KvCache tcache_, dcache_;  // 2N slots each: the particles live in one bank of N at a time
  int resamples_ = 0;

  // The generation in progress.
  GenerateOptions opt_;
  std::vector<int32_t> prompt_;
  GenerateResult r_;
  std::optional<Sampler> sampler_, dsampler_;
  std::vector<std::vector<int32_t>> hist_;  // per particle: prompt and output
  std::vector<int64_t> dlen_;               // positions in each particle's draft cache
  std::vector<double> logw_;
  std::vector<std::vector<int32_t>> x_;     // this step's guesses per particle
  std::vector<std::vector<double>> logq_;
  int bank_ = 0;
  int64_t generated_ = 0;
  std::chrono::steady_clock::time_point t0_;
  Batch batch_;
  std::vector<float> logits_, row_;
};

}  // namespace brisk
