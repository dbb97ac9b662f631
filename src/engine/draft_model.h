// A small model as the drafter (Leviathan et al., 2023; Chen et al., 2023): it runs
// autoregressively for k tokens, sampling with the same settings as the target, and hands
// over its distribution q of each guess so verification can stay exact. It must share the
// target's tokenizer (checked when it is made). One sequence's drafter: a BatchedDraftModel
// of one slot (engine/batched_draft_model.h), which feeds only what is new each step.
#pragma once
#include <memory>
#include <optional>

#include "engine/batched_draft_model.h"
#include "engine/draft_source.h"
#include "engine/loaded_model.h"

namespace brisk {

// Throws brisk::Error naming `path` unless the two vocabularies are the same, piece by piece.
void check_same_vocabulary(const Tokenizer& draft, const Tokenizer& target, const std::string& path);

// The draft model at `path` for a target with `target_tokenizer` (checked as above), its
// logits restricted to `vocab` tokens (--draft-vocab, engine/draft_vocabulary.h; 0: all of them).
std::shared_ptr<const LoadedModel> load_draft_model(const std::string& path, const Tokenizer& target_tokenizer,
                                                    int64_t vocab = 0);

class DraftModelSource : public DraftSource {
 public:
  // Throws brisk::Error when the draft's vocabulary differs from `target_tokenizer`'s.
  DraftModelSource(const std::string& path, const Tokenizer& target_tokenizer, int64_t vocab = 0);
  const char* name() const override { return "draft"; }
  void begin(const SamplingParams& sampling) override;
  std::vector<DraftToken> propose(std::span<const int32_t> tokens, int max_tokens) override;

 private:
  BatchedDraftModel drafter_;
  std::optional<Sampler> sampler_;
};

}  // namespace brisk
