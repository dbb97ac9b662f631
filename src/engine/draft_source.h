// Speculative decoding's drafters behind one interface: something that guesses the next
// few tokens cheaply, so the target model can check all the guesses in one forward pass
// (engine/speculative_decoder.h). The guesses never change what is generated, only how
// fast: verification keeps the target's distribution exactly.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace brisk {

class Tokenizer;

// One guessed token. `q` is the distribution it was drawn from (the drafter's sampler's
// final distribution); empty means a deterministic guess (q is a point mass on `id`).
struct DraftToken {
  int32_t id = 0;
  std::vector<TokenProb> q;
};

class DraftSource {
 public:
  virtual ~DraftSource() = default;
  virtual const char* name() const = 0;

  // A new generation starts with these sampling settings (a drafter that samples uses
  // them, so its q is as close to the target's p as it can be).
  virtual void begin(const SamplingParams& sampling) {}

  // Up to `max_tokens` guesses of what follows `tokens` (prompt and output so far, the
  // last one not yet run through the target). Fewer or none is fine.
  virtual std::vector<DraftToken> propose(std::span<const int32_t> tokens, int max_tokens) = 0;

  // After verification: `fed[i]` was run through the target and `logits` row i holds the
  // target's next-token logits after it (n_vocab floats per row); every row is conditioned
  // on verified tokens only. RACER's copy-logit table learns from these.
  virtual void observe(std::span<const int32_t> fed, std::span<const float> logits,
                       int64_t n_vocab) {}
};

// `brisk run/bench --spec METHOD [--draft MODEL] [--spec-k K]`.
struct SpecOptions {
  std::string method = "none";  // none | lookup | racer | draft | smc (engine/smc_decoder.h)
  std::string draft_model;      // for draft and smc: a GGUF file or HF folder, same tokenizer
  int k = 4;                    // most tokens drafted per step
  int particles = 4;            // smc only
  int64_t draft_vocab = 0;      // draft only: tokens the draft computes logits for (engine/draft_vocabulary.h); 0: all

  bool enabled() const { return method != "none"; }
  // Throws brisk::Error naming the option when the method is unknown or a value is invalid.
  void validate() const;
};

// The drafter `opt` names, for a target with `tokenizer` (which the draft model must
// share: checked). nullptr for "none" and "smc" (SmcDecoder drafts by itself).
std::unique_ptr<DraftSource> make_draft_source(const SpecOptions& opt, const Tokenizer& tokenizer);

}  // namespace brisk
