// RACER-style retrieval drafts (arXiv 2604.14885, "RACER"): training-free guesses from two
// sources merged into one draft:
//  - retrieval: exact continuations of the context's current suffix found earlier in the
//    context, the most frequent continuation first (the paper's Aho-Corasick trie over the
//    context, here a scan of the token list, which is as fast at our context lengths);
//  - copy-logit: the target's own top next-token prediction recorded the last time it saw
//    the current token (updated from every verified position).
// Each draft step takes the retrieval guess when the suffix (>= 2 tokens) matched and the
// copy-logit guess otherwise. The paper drafts trees (top-k siblings, verified with tree
// attention); brisk verifies one chain per step, so only the best branch of each is kept.
#pragma once
#include <unordered_map>

#include "engine/draft_source.h"

namespace brisk {

class RacerDraft : public DraftSource {
 public:
  explicit RacerDraft(int max_ngram = 4) : max_ngram_(max_ngram) {}
  const char* name() const override { return "racer"; }
  void begin(const SamplingParams&) override { next_of_.clear(); }
  std::vector<DraftToken> propose(std::span<const int32_t> tokens, int max_tokens) override;
  void observe(std::span<const int32_t> fed, std::span<const float> logits,
               int64_t n_vocab) override;

 private:
  // The most frequent token that followed an earlier occurrence of the suffix of `t`
  // (longest suffix of max_ngram_..2 tokens with a match), or -1.
  int32_t retrieve(std::span<const int32_t> t) const;

  int max_ngram_;
  std::unordered_map<int32_t, int32_t> next_of_;  // token -> target's argmax after it, last seen
};

}  // namespace brisk
