#include "engine/racer_draft.h"

#include "engine/ngram_match.h"

namespace brisk {

int32_t RacerDraft::retrieve(std::span<const int32_t> t) const {
  for (int n = max_ngram_; n >= 2; --n) {
    if (t.size() <= static_cast<size_t>(n)) continue;
    // Count continuations; ties go to the most recent (scanned first).
    std::unordered_map<int32_t, int> count;
    int32_t best = -1;
    int best_count = 0;
    for (size_t end = t.size() - 1; end >= static_cast<size_t>(n); --end) {
      if (!suffix_occurs_before(t, end, n)) continue;
      int c = ++count[t[end]];
      if (c > best_count) best = t[end], best_count = c;
    }
    if (best >= 0) return best;
  }
  return -1;
}

std::vector<DraftToken> RacerDraft::propose(std::span<const int32_t> tokens, int max_tokens) {
  std::vector<DraftToken> out;
  std::vector<int32_t> ctx(tokens.begin(), tokens.end());
  while (static_cast<int>(out.size()) < max_tokens && !ctx.empty()) {
    int32_t guess = retrieve(ctx);
    if (guess < 0) {
      auto it = next_of_.find(ctx.back());
      if (it == next_of_.end()) break;
      guess = it->second;
    }
    out.push_back({guess, {}});
    ctx.push_back(guess);
  }
  return out;
}

void RacerDraft::observe(std::span<const int32_t> fed, std::span<const float> logits,
                         int64_t n_vocab) {
  for (size_t i = 0; i < fed.size(); ++i)
    next_of_[fed[i]] = argmax(logits.subspan(i * n_vocab, n_vocab));
}

}  // namespace brisk
