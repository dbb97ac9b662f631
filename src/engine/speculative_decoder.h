// Speculative decoding (Leviathan et al., 2023, "Fast Inference from Transformers via
// Speculative Decoding"; Chen et al., 2023, "Accelerating Large Language Model Decoding
// with Speculative Sampling"): a drafter guesses k tokens, the target runs the last
// committed token and all k guesses in ONE forward pass (logits for every position), and
// speculative rejection sampling accepts a prefix of the guesses. The output has exactly
// the target's distribution (the Sampler's final one: penalties, top-k/p, min-p,
// temperature); with greedy sampling it is token for token the plain greedy output. The
// K/V of rejected guesses is rolled back with KvCache::truncate.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/draft_source.h"
#include "engine/sampler.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace brisk {

// Exact verification of `drafts` against the target. Row i of `rows` (n_vocab floats
// each, drafts.size() + 1 rows; left unchanged) holds the target's logits after `history`
// plus drafts[0..i). Guess x with draft probability q(x) is accepted with probability
// min(1, p(x) / q(x)); at the first rejection one token is drawn from norm(max(0, p - q))
// instead; when all are accepted one more is drawn from the last row. Appends the accepted
// guesses and that one token to `history`; returns how many guesses were accepted.
int verify_drafts(Sampler& sampler, std::span<const float> rows, int64_t n_vocab,
                  std::span<const DraftToken> drafts, std::vector<int32_t>& history);

struct SpecStats {
  int steps = 0;     // target forward passes that verified drafts
  int drafted = 0;   // guesses sent to verification
  int accepted = 0;  // guesses accepted
};

// The draft length adapts within [1, max_k]: +2 after a step whose guesses were all
// accepted, -1 after one with a rejection (the heuristic of Hugging Face transformers'
// assisted generation), so a drafter that keeps missing costs little.
class AdaptiveDraftLength {
 public:
  explicit AdaptiveDraftLength(int max_k);  // throws brisk::Error when max_k < 1
  int next() const { return k_; }
  void update(int drafted, int accepted);

 private:
  int max_k_, k_;
};

class SpeculativeDecoder {
 public:
  // `max_k`: most guesses per step (AdaptiveDraftLength).
  SpeculativeDecoder(DraftSource& source, int max_k);

  // One step for slot `seq` of `cache`, which holds the K/V of all of `history` but its
  // last token. Drafts, verifies in one forward pass, rolls the rejected K/V back, and
  // appends the accepted guesses plus one sampled token to `history` (at least one token
  // is always added; the cache then again holds all but the last). The guesses are capped
  // so the pass fits the cache's capacity; the caller stops before history fills it.
  void step(Model& model, KvCache& cache, int32_t seq, std::vector<int32_t>& history,
            Sampler& sampler);

  const SpecStats& stats() const { return stats_; }

 private:
  DraftSource& source_;
  AdaptiveDraftLength k_;
  SpecStats stats_;
  Batch batch_;
  std::vector<float> logits_;
};

}  // namespace brisk
