#include "engine/prompt_lookup.h"

#include "engine/ngram_match.h"

namespace brisk {

std::vector<DraftToken> PromptLookupDraft::propose(std::span<const int32_t> tokens,
                                                   int max_tokens) {
  std::vector<DraftToken> out;
  if (tokens.size() < 2) return out;
  for (int n = max_ngram_; n >= min_ngram_ && out.empty(); --n) {
    // Latest occurrence first: recent text predicts the next text best.
    for (size_t end = tokens.size() - 1; end >= static_cast<size_t>(n); --end) {
      if (!suffix_occurs_before(tokens, end, n)) continue;
      for (size_t i = end; i < tokens.size() && static_cast<int>(out.size()) < max_tokens; ++i)
        out.push_back({tokens[i], {}});
      break;
    }
  }
  return out;
}

}  // namespace brisk
