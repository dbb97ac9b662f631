// Prompt lookup decoding (Saxena, 2023, "Prompt Lookup Decoding"; the n-gram drafter of
// llama.cpp and vLLM): when the last few tokens occurred before in the prompt or the
// output, guess that what followed them then follows them again. Free, and strong when
// the output copies the context (code edits, summaries, quotes).
#pragma once
#include "engine/draft_source.h"

namespace brisk {

class PromptLookupDraft : public DraftSource {
 public:
  // Tries suffixes of max_ngram tokens down to min_ngram; the most recent match wins.
  explicit PromptLookupDraft(int max_ngram = 3, int min_ngram = 1)
      : max_ngram_(max_ngram), min_ngram_(min_ngram) {}
  const char* name() const override { return "lookup"; }
  std::vector<DraftToken> propose(std::span<const int32_t> tokens, int max_tokens) override;

 private:
  int max_ngram_, min_ngram_;
};

}  // namespace brisk
