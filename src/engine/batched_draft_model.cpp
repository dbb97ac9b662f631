#include "engine/batched_draft_model.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <optional>

#include "engine/draft_model.h"
#include "engine/prompt_lookup.h"
#include "util/thread_pool.h"

namespace brisk {

SamplingParams draft_sampling(const SamplingParams& target) {
  SamplingParams p = target;
  p.seed = target.seed ^ 0xD1B54A32D192ED03ull;
  return p;
}

BatchedDraftModel::BatchedDraftModel(std::shared_ptr<const LoadedModel> draft, int n_slots, int64_t n_ctx)
    : draft_(std::move(draft)),
      cache_(draft_->model->cache_shape(
          n_slots, std::min<int64_t>(draft_->model->config().n_ctx_train > 0 ? draft_->model->config().n_ctx_train
                                                                             : n_ctx, n_ctx))),
      cached_(static_cast<size_t>(n_slots)),
      base_(static_cast<size_t>(n_slots), 0) {}

void BatchedDraftModel::forward(bool serial) {
  std::optional<ThreadPool::Serial> on_this_thread;
  if (serial) on_this_thread.emplace();
  ++passes_;
  draft_->model->forward(batch_, cache_, logits_);
}

void BatchedDraftModel::logits_row(size_t j, std::vector<float>& row) const {
  const Model& m = *draft_->model;
  row.resize(static_cast<size_t>(m.config().n_vocab));
  m.vocab_logits(logits_.data() + j * static_cast<size_t>(m.n_logits()), row.data());
}

// The longest prefix the slot's cached tokens share with `tokens` from `base` on, as
// propose keeps it (always re-feeding the last token).
static size_t kept_prefix(const std::vector<int32_t>& cached, std::span<const int32_t> tokens, size_t base) {
  size_t keep = 0;
  while (keep < cached.size() && base + keep + 1 < tokens.size() && cached[keep] == tokens[base + keep]) ++keep;
  return keep;
}

BatchedDraftModel::Window BatchedDraftModel::window(int slot, std::span<const int32_t> tokens, int k) const {
  const size_t n = tokens.size();
  Window w{base_[static_cast<size_t>(slot)], 0};
  if (w.base < n) w.keep = kept_prefix(cached_[static_cast<size_t>(slot)], tokens, w.base);
  // Nothing to keep, too much to read, or no room for the guesses: a fresh window.
  if (w.keep == 0 || static_cast<int64_t>(n - w.base - w.keep) > kWindow ||
      static_cast<int64_t>(n - w.base) + k > capacity()) {
    const int64_t len = std::max<int64_t>(1, std::min<int64_t>(capacity() - k, kWindow));
    w = {n - static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(n), len)), 0};
  }
  return w;
}

int64_t BatchedDraftModel::lag(int slot, std::span<const int32_t> tokens) const {
  const Window w = window(slot, tokens, 0);
  return static_cast<int64_t>(tokens.size() - w.base - w.keep);
}

void BatchedDraftModel::propose(std::span<const DraftRequest> requests, bool serial) {
  const auto vocab = static_cast<size_t>(draft_->model->config().n_vocab);
  struct Live {
    const DraftRequest* r;
    std::vector<int32_t> history;  // tokens and the guesses so far (the sampler's penalties)
    std::vector<float> row;        // the draft's logits for the next guess
    bool done = false;             // its remaining guesses copied from the context
  };
  std::vector<Live> live;
  for (const DraftRequest& r : requests) {
    r.out->clear();
    if (r.k <= 0 || r.tokens.empty() || r.k + 1 > capacity()) continue;
    live.push_back({&r, std::vector<int32_t>(r.tokens.begin(), r.tokens.end()), {}});
  }
  if (live.empty()) return;

  // Pass 0: what each slot lacks of its sequence's tokens (after the last verification one
  // or two tokens; a new sequence's whole prompt), always re-feeding the last token (its
  // logits give the first guess). Long catch-ups are cut into passes of at most 512 tokens;
  // a sequence's tokens stay in order across them.
  struct Feed {
    size_t live;
    int32_t token, pos;
    bool last;
  };
  std::vector<Feed> feed;
  for (size_t i = 0; i < live.size(); ++i) {
    const DraftRequest& r = *live[i].r;
    std::vector<int32_t>& cached = cached_[static_cast<size_t>(r.slot)];
    const Window w = window(r.slot, r.tokens, r.k);
    base_[static_cast<size_t>(r.slot)] = w.base;
    cache_.truncate(r.slot, static_cast<int64_t>(w.keep));  // rejected guesses (or another sequence's tail) rolled back
    cached.assign(r.tokens.begin() + static_cast<std::ptrdiff_t>(w.base), r.tokens.end());
    for (size_t j = w.base + w.keep; j < r.tokens.size(); ++j)
      feed.push_back({i, r.tokens[j], static_cast<int32_t>(j - w.base), j + 1 == r.tokens.size()});
  }
  std::vector<size_t> row_of;  // per logits row of a pass: its entry of `live`
  const auto fed_from = std::chrono::steady_clock::now();
  for (size_t f = 0; f < feed.size(); f += 512) {
    batch_.clear();
    row_of.clear();
    for (size_t j = f; j < std::min(feed.size(), f + 512); ++j) {
      const Feed& e = feed[j];
      batch_.add(e.token, e.pos, live[e.live].r->slot, e.last);
      if (e.last) row_of.push_back(e.live);
    }
    forward(serial);
    for (size_t j = 0; j < row_of.size(); ++j) logits_row(j, live[row_of[j]].row);
  }
  if (feed.size() >= 64) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - fed_from).count() /
                     static_cast<double>(feed.size());
    catch_up_s_per_token_ = catch_up_s_per_token_ == 0 ? s : catch_up_s_per_token_ + (s - catch_up_s_per_token_) / 4;
  }

  // Pass j: every sequence still drafting draws its j-th guess, and the guesses (but the
  // last of each sequence, which nothing needs the logits of) go through one pass together.
  //
  // A guess the context agrees with ends the drafting: when the last kCopyNgram tokens
  // occurred before and the token that followed them then is the draft's own guess, what
  // followed it becomes the remaining guesses (prompt lookup's copy, engine/prompt_lookup.h)
  // with no further draft pass. Where text repeats (code being edited, quoted passages, the
  // model's own loops) the passes would mostly reproduce that copy; the copied guesses are
  // deterministic given the tokens (q a point mass), so verification stays exact.
  // brisk-small with a q4_0 brisk-tiny, k = 4: acceptance unchanged or higher on the three
  // prompt kinds, 5% / 11% / 27% more tokens/s on prose / code editing / long QA (medians of
  // three alternated rounds, docs/benchmarks.md "Sessions 13-14").
  constexpr int kCopyNgram = 3;
  for (int j = 0;; ++j) {
    batch_.clear();
    row_of.clear();
    for (size_t i = 0; i < live.size(); ++i) {
      Live& l = live[i];
      const DraftRequest& r = *l.r;
      if (j >= r.k || l.done) continue;
      std::vector<TokenProb> q = r.sampler->candidates(std::span<float>(l.row.data(), vocab), l.history);
      DraftToken d{q.size() == 1 ? q[0].id : draw(q, r.sampler->next_uniform()), {}};
      if (q.size() > 1) d.q = std::move(q);
      std::vector<DraftToken> copy;  // copy[0] is the context's guess at d's position
      if (j + 1 < r.k) copy = PromptLookupDraft(kCopyNgram, kCopyNgram).propose(l.history, r.k - j);
      l.done = copy.size() > 1 && copy[0].id == d.id;
      l.history.push_back(d.id);
      r.out->push_back(std::move(d));
      if (l.done) {
        std::move(copy.begin() + 1, copy.end(), std::back_inserter(*r.out));
        continue;
      }
      if (j + 1 == r.k) continue;
      std::vector<int32_t>& cached = cached_[static_cast<size_t>(r.slot)];
      batch_.add(r.out->back().id, static_cast<int32_t>(cached.size()), r.slot, true);
      cached.push_back(r.out->back().id);
      row_of.push_back(i);
    }
    if (batch_.size() == 0) break;
    forward(serial);
    for (size_t t = 0; t < row_of.size(); ++t) logits_row(t, live[row_of[t]].row);
  }
}

}  // namespace brisk
