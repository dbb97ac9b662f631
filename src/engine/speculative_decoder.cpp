#include "engine/speculative_decoder.h"

#include <algorithm>
#include <unordered_map>

#include "util/error.h"

namespace brisk {

namespace {
double prob_of(std::span<const TokenProb> dist, int32_t id) {
  for (const TokenProb& t : dist)
    if (t.id == id) return t.p;
  return 0;
}

// A draw from dist, consuming a uniform only when there is a choice (so greedy decoding
// never touches the random stream).
int32_t draw_from(Sampler& sampler, std::span<const TokenProb> dist) {
  return dist.size() == 1 ? dist[0].id : draw(dist, sampler.next_uniform());
}
}  // namespace

int verify_drafts(Sampler& sampler, std::span<const float> rows, int64_t n_vocab,
                  std::span<const DraftToken> drafts, std::vector<int32_t>& history) {
  if (static_cast<int64_t>(rows.size()) != static_cast<int64_t>(drafts.size() + 1) * n_vocab)
    fail("speculative verification needs {} rows of {} logits, got {} floats", drafts.size() + 1,
         n_vocab, rows.size());
  // Vocabulary-sized scratch kept by the thread: fresh vectors each call cost page faults
  // (build/bench_sampler, a rejected draft over 16,384 tokens: 1.0 -> 0.1 ms).
  thread_local std::vector<float> row, q_by_id;
  thread_local std::vector<TokenProb> residual;
  row.resize(static_cast<size_t>(n_vocab));
  for (size_t i = 0; i <= drafts.size(); ++i) {
    std::copy_n(rows.begin() + i * n_vocab, n_vocab, row.begin());
    std::vector<TokenProb> p = sampler.candidates(row, history);  // the target's final distribution
    if (i == drafts.size()) {  // all guesses accepted: the pass gives one more token for free
      history.push_back(draw_from(sampler, p));
      return static_cast<int>(i);
    }
    const DraftToken& d = drafts[i];
    const double px = prob_of(p, d.id);
    const double qx = d.q.empty() ? 1.0 : prob_of(d.q, d.id);
    // Accept with probability min(1, p/q); a point-mass p (greedy) needs no random number.
    const bool accept = p.size() == 1 ? px == 1.0 : sampler.next_uniform() * qx < px;
    if (accept) {
      history.push_back(d.id);
      continue;
    }
    // The residual max(0, p - q), over p's support (outside it p is 0), renormalized. q is
    // laid out by token id first: looked up in the list for each of p's tokens, a rejection
    // cost |p| x |q| steps, 16,384^2 on brisk-tiny's vocabulary with no top-k (45 ms).
    if (!d.q.empty()) {
      q_by_id.assign(static_cast<size_t>(n_vocab), 0.0f);
      for (auto t = d.q.rbegin(); t != d.q.rend(); ++t)  // (the first of a repeated id counts, as in prob_of)
        if (t->id >= 0 && t->id < n_vocab) q_by_id[static_cast<size_t>(t->id)] = t->p;
    }
    residual.clear();
    double sum = 0;
    for (const TokenProb& t : p) {
      double q = d.q.empty() ? (t.id == d.id ? 1.0 : 0.0) : q_by_id[static_cast<size_t>(t.id)];
      double r = std::max(0.0, static_cast<double>(t.p) - q);
      if (r > 0) residual.push_back({t.id, static_cast<float>(r)}), sum += r;
    }
    if (sum <= 0) residual = p;  // p <= q everywhere only when p == q: then p itself
    else
      for (TokenProb& t : residual) t.p = static_cast<float>(t.p / sum);
    history.push_back(draw_from(sampler, residual));
    return static_cast<int>(i);
  }
  return 0;  // not reached
}

AdaptiveDraftLength::AdaptiveDraftLength(int max_k) : max_k_(max_k), k_(max_k) {
  if (max_k < 1) fail("the draft length (--spec-k) must be >= 1, got {}", max_k);
}

void AdaptiveDraftLength::update(int drafted, int accepted) {
  if (drafted > 0) k_ = accepted == drafted ? std::min(max_k_, k_ + 2) : std::max(1, k_ - 1);
}

SpeculativeDecoder::SpeculativeDecoder(DraftSource& source, int max_k)
    : source_(source), k_(max_k) {}

void SpeculativeDecoder::step(Model& model, KvCache& cache, int32_t seq,
                              std::vector<int32_t>& history, Sampler& sampler) {
  const int64_t n = static_cast<int64_t>(history.size());
  if (n < 1 || cache.length(seq) != n - 1)
    fail("speculative step: the cache holds {} positions but {} tokens precede the last one",
         cache.length(seq), n - 1);
  const int k = static_cast<int>(std::clamp<int64_t>(cache.capacity() - n, 0, k_.next()));
  std::vector<DraftToken> drafts = source_.propose(history, k);
  if (static_cast<int>(drafts.size()) > k) drafts.resize(k);

  // One pass: the last committed token and every guess, logits for all of them.
  batch_.clear();
  batch_.add(history.back(), static_cast<int32_t>(n - 1), seq, true);
  for (size_t i = 0; i < drafts.size(); ++i)
    batch_.add(drafts[i].id, static_cast<int32_t>(n + i), seq, true);
  model.forward(batch_, cache, logits_);

  const int64_t n_vocab = model.config().n_vocab;
  const int accepted = verify_drafts(sampler, logits_, n_vocab, drafts, history);
  // Rows 0..accepted followed verified tokens only: what the drafter may learn from.
  source_.observe(std::span<const int32_t>(batch_.tokens.data(), accepted + 1),
                  std::span<const float>(logits_.data(), (accepted + 1) * n_vocab), n_vocab);
  cache.truncate(seq, n + accepted);  // the rejected guesses' K/V rolled back

  ++stats_.steps;
  stats_.drafted += static_cast<int>(drafts.size());
  stats_.accepted += accepted;
  k_.update(static_cast<int>(drafts.size()), accepted);
}

}  // namespace brisk
