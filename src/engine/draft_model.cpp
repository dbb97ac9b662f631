#include "engine/draft_model.h"

#include <algorithm>

#include "util/error.h"
#include "util/thread_pool.h"

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

void draft_forward(Model& draft, const Batch& batch, KvCache& cache, std::vector<float>& logits) {
  std::optional<ThreadPool::Serial> serial;
  const int32_t last_pos = batch.size() > 0 ? *std::max_element(batch.pos.begin(), batch.pos.end()) : 0;
  if (batch.size() <= 8 && last_pos < 1024) serial.emplace();
  draft.forward(batch, cache, logits);
}

DraftModelSource::DraftModelSource(const std::string& path, const Tokenizer& target_tokenizer)
    : DraftModelSource(std::make_shared<const LoadedModel>(load_for_generation(path)), 4096) {
  check_same_vocabulary(*draft_->tokenizer, target_tokenizer, path);
}

DraftModelSource::DraftModelSource(std::shared_ptr<const LoadedModel> draft, int64_t n_ctx)
    : draft_(std::move(draft)),
      cache_(draft_->model->cache_shape(
          1, std::min<int64_t>(draft_->model->config().n_ctx_train > 0 ? draft_->model->config().n_ctx_train
                                                                       : n_ctx, n_ctx))) {}

void DraftModelSource::begin(const SamplingParams& sampling) {
  SamplingParams p = sampling;
  p.seed = sampling.seed ^ 0xD1B54A32D192ED03ull;  // a stream of its own, still reproducible
  sampler_.emplace(p);
}

std::vector<DraftToken> DraftModelSource::propose(std::span<const int32_t> tokens,
                                                  int max_tokens) {
  std::vector<DraftToken> out;
  if (!sampler_) begin(SamplingParams{});
  if (tokens.empty() || static_cast<int64_t>(tokens.size()) + max_tokens > cache_.capacity())
    return out;  // no room left to draft: the target goes on alone
  auto run = [&](const Batch& b) { draft_forward(*draft_->model, b, cache_, logits_); };
  // Reuse the common prefix, always re-feeding the last token (its logits are needed).
  size_t keep = 0;
  while (keep < cached_.size() && keep + 1 < tokens.size() && cached_[keep] == tokens[keep]) ++keep;
  cache_.truncate(0, static_cast<int64_t>(keep));
  cached_.assign(tokens.begin(), tokens.begin() + keep);
  Batch batch;
  for (size_t i = keep; i < tokens.size(); i += 512) {
    size_t end = std::min(tokens.size(), i + 512);
    batch.clear();
    for (size_t j = i; j < end; ++j)
      batch.add(tokens[j], static_cast<int32_t>(j), 0, j + 1 == tokens.size());
    run(batch);
  }
  cached_.assign(tokens.begin(), tokens.end());

  std::vector<int32_t> history(tokens.begin(), tokens.end());
  const int64_t n_vocab = draft_->model->config().n_vocab;
  for (int j = 0; j < max_tokens; ++j) {
    std::vector<TokenProb> q = sampler_->candidates(std::span<float>(logits_.data(), n_vocab), history);
    DraftToken d{q.size() == 1 ? q[0].id : draw(q, sampler_->next_uniform()), {}};
    if (q.size() > 1) d.q = std::move(q);
    history.push_back(d.id);
    out.push_back(std::move(d));
    if (j + 1 == max_tokens) break;
    batch.clear();
    batch.add(out.back().id, static_cast<int32_t>(cached_.size()), 0, true);
    run(batch);
    cached_.push_back(out.back().id);
  }
  return out;
}

}  // namespace brisk
