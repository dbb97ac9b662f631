#include "engine/draft_model.h"

#include "engine/draft_vocabulary.h"
#include "util/error.h"

namespace brisk {

// The draft's guesses are only useful in the target's token ids.
void check_same_vocabulary(const Tokenizer& draft, const Tokenizer& target, const std::string& path) {
  if (draft.n_vocab() != target.n_vocab())
    fail("draft model '{}' has a vocabulary of {} tokens but the target's has {}: the draft "
         "must share the target's tokenizer", path, draft.n_vocab(), target.n_vocab());
  for (int32_t id = 0; id < draft.n_vocab(); ++id)
    if (draft.token_to_piece(id, true) != target.token_to_piece(id, true))
      fail("draft model '{}': token {} is '{}' but the target's is '{}': the draft must share "
           "the target's tokenizer", path, id, draft.token_to_piece(id, true),
           target.token_to_piece(id, true));
}

std::shared_ptr<const LoadedModel> load_draft_model(const std::string& path, const Tokenizer& target_tokenizer,
                                                    int64_t vocab) {
  auto d = std::make_shared<LoadedModel>(load_for_generation(path));
  check_same_vocabulary(*d->tokenizer, target_tokenizer, path);
  if (vocab > 0) d->model->set_output_rows(draft_vocabulary(*d->tokenizer, vocab));
  return d;
}

DraftModelSource::DraftModelSource(const std::string& path, const Tokenizer& target_tokenizer, int64_t vocab)
    : drafter_(load_draft_model(path, target_tokenizer, vocab), 1, 4096) {}

void DraftModelSource::begin(const SamplingParams& sampling) { sampler_.emplace(draft_sampling(sampling)); }

std::vector<DraftToken> DraftModelSource::propose(std::span<const int32_t> tokens, int max_tokens) {
  if (!sampler_) begin(SamplingParams{});
  std::vector<DraftToken> out;
  const DraftRequest r{0, tokens, max_tokens, &*sampler_, &out};
  drafter_.propose(std::span<const DraftRequest>(&r, 1));
  return out;
}

}  // namespace brisk
