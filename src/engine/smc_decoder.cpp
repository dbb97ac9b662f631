#include "engine/smc_decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/draft_model.h"
#include "util/error.h"

namespace brisk {

namespace {
double prob_of(const std::vector<TokenProb>& d, int32_t id) {
  for (const TokenProb& t : d)
    if (t.id == id) return t.p;
  return 0;
}

// Positions [begin, end) of slot `from` copied to slot `to` (every layer); `to` then holds
// `end` positions.
void copy_positions(KvCache& c, int64_t from, int64_t to, int64_t begin, int64_t end) {
  const size_t bytes = static_cast<size_t>(c.row_size()) * sizeof(float);
  c.truncate(to, begin);
  for (int64_t l = 0; l < c.shape().n_layer; ++l)
    for (int64_t p = begin; p < end; ++p) {
      std::memcpy(c.k_row(l, to, p), c.k_row(l, from, p), bytes);
      std::memcpy(c.v_row(l, to, p), c.v_row(l, from, p), bytes);
    }
  c.set_length(to, end);
}

int64_t capped_ctx(const Model& m, int64_t n_ctx) {
  const int64_t train = m.config().n_ctx_train > 0 ? m.config().n_ctx_train : n_ctx;
  return std::min(n_ctx, train);
}
}  // namespace

SmcDecoder::SmcDecoder(Model& target, const Tokenizer& tokenizer, const std::string& draft_path,
                       int particles, int k, int64_t n_ctx)
    : SmcDecoder(target, tokenizer, load_draft_model(draft_path, tokenizer), particles, k, n_ctx) {}

SmcDecoder::SmcDecoder(Model& target, const Tokenizer& tokenizer, std::shared_ptr<const LoadedModel> draft,
                       int particles, int k, int64_t n_ctx)
    : target_(target),
      tok_(tokenizer),
      draft_(std::move(draft)),
      n_(particles),
      k_(k),
      tcache_(target.cache_shape(2 * std::clamp(particles, 1, 64), n_ctx)),
      dcache_(draft_->model->cache_shape(2 * std::clamp(particles, 1, 64), capped_ctx(*draft_->model, n_ctx))) {
  if (particles < 1 || particles > 64) fail("SMC particles (--spec-particles) must be in [1, 64], got {}", particles);
  if (k < 1) fail("the draft length (--spec-k) must be >= 1, got {}", k);
  if (!target.uses_kv_blocks()) fail("--spec smc needs the CPU model (it copies K/V between cache slots)");
}

GenerateResult SmcDecoder::generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt) {
  start(prompt, opt);
  while (step()) {}
  return result();
}

void SmcDecoder::start(const std::vector<int32_t>& prompt, const GenerateOptions& opt) {
  if (!(opt.sampling.temperature > 0))
    fail("--spec smc reweights sampled particles: it needs --temp > 0 (greedy has nothing to weigh)");
  const int64_t cap = std::min(tcache_.capacity(), dcache_.capacity());
  if (prompt.empty()) fail("the prompt is empty: at least one token is needed");
  if (static_cast<int64_t>(prompt.size()) + k_ + 1 >= cap)
    fail("the prompt has {} tokens; with --spec-k {} it does not fit the context of {}", prompt.size(), k_, cap);
  if (opt.max_tokens < 0) fail("max tokens must be >= 0, got {}", opt.max_tokens);

  opt_ = opt;
  prompt_ = prompt;
  r_ = GenerateResult{};
  r_.finish_reason = "length";
  resamples_ = 0;
  const int64_t n0 = static_cast<int64_t>(prompt.size());
  // Prompt (all but its last token) into slot 0 of both caches, then copied to every slot.
  auto t_prompt = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < 2 * n_; ++s) tcache_.truncate(s, 0), dcache_.truncate(s, 0);
  for (int64_t i = 0; i + 1 < n0; i += opt.n_batch) {
    batch_.clear();
    for (int64_t j = i; j < std::min(n0 - 1, i + opt.n_batch); ++j)
      batch_.add(prompt[static_cast<size_t>(j)], static_cast<int32_t>(j), 0, false);
    target_.forward(batch_, tcache_, logits_);
    draft_->model->forward(batch_, dcache_, logits_);
  }
  for (int64_t s = 1; s < 2 * n_; ++s) copy_positions(tcache_, 0, s, 0, n0 - 1), copy_positions(dcache_, 0, s, 0, n0 - 1);
  r_.timings.prompt_tokens = static_cast<int>(n0 - 1);
  r_.timings.prompt_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_prompt).count();

  sampler_.emplace(opt.sampling);
  SamplingParams dp = opt.sampling;
  dp.seed ^= 0xD1B54A32D192ED03ull;
  dsampler_.emplace(dp);
  hist_.assign(n_, prompt);
  dlen_.assign(n_, n0 - 1);
  logw_.assign(n_, 0.0);
  x_.assign(n_, std::vector<int32_t>(k_));
  logq_.assign(n_, std::vector<double>(k_));
  row_.resize(static_cast<size_t>(target_.config().n_vocab));
  bank_ = 0;
  generated_ = 0;
  t0_ = std::chrono::steady_clock::now();
}

bool SmcDecoder::step() {
  const int64_t cap = std::min(tcache_.capacity(), dcache_.capacity()), n0 = static_cast<int64_t>(prompt_.size());
  const int64_t n_vocab = target_.config().n_vocab;
  if (!(generated_ < opt_.max_tokens && static_cast<int64_t>(hist_[0].size()) + k_ + 1 < cap)) return false;
  Sampler& sampler = *sampler_;
  Sampler& dsampler = *dsampler_;
  const int64_t len = static_cast<int64_t>(hist_[0].size());  // the same for every particle
  // 1. Each particle drafts k tokens from q (one draft pass per token for all particles).
  for (int j = 0; j < k_; ++j) {
    batch_.clear();
    for (int i = 0; i < n_; ++i) {
      const int32_t slot = bank_ + i;
      if (j == 0)
        for (int64_t p = dlen_[i]; p < len; ++p) batch_.add(hist_[i][static_cast<size_t>(p)], static_cast<int32_t>(p), slot, p + 1 == len);
      else
        batch_.add(x_[i][j - 1], static_cast<int32_t>(len - 1 + j), slot, true);
    }
    draft_->model->forward(batch_, dcache_, logits_);
    for (int i = 0; i < n_; ++i) {
      std::vector<int32_t> h = hist_[i];
      h.insert(h.end(), x_[i].begin(), x_[i].begin() + j);
      draft_->model->vocab_logits(logits_.data() + i * draft_->model->n_logits(), row_.data());
      std::vector<TokenProb> q = dsampler.candidates(row_, h);
      x_[i][j] = q.size() == 1 ? q[0].id : draw(q, dsampler.next_uniform());
      logq_[i][j] = std::log(prob_of(q, x_[i][j]));
    }
  }
  // 2. The target scores every particle's last token and guesses in one pass.
  batch_.clear();
  for (int i = 0; i < n_; ++i) {
    batch_.add(hist_[i].back(), static_cast<int32_t>(len - 1), bank_ + i, true);
    for (int j = 0; j < k_; ++j) batch_.add(x_[i][j], static_cast<int32_t>(len + j), bank_ + i, true);
  }
  target_.forward(batch_, tcache_, logits_);
  ++r_.timings.decode_steps;
  // 3. Importance weights, and one more token per particle from the target's p.
  for (int i = 0; i < n_; ++i) {
    dlen_[i] = len + k_ - 1;
    for (int j = 0; j <= k_; ++j) {
      std::copy_n(logits_.begin() + (i * (k_ + 1) + j) * n_vocab, n_vocab, row_.begin());
      std::vector<TokenProb> p = sampler.candidates(row_, hist_[i]);
      if (j == k_) {
        hist_[i].push_back(p.size() == 1 ? p[0].id : draw(p, sampler.next_uniform()));
        break;
      }
      // A guess the target's filters exclude weighs ~0 (floored so a population where
      // every particle has one still has an order).
      logw_[i] += std::log(std::max(prob_of(p, x_[i][j]), 1e-9)) - logq_[i][j];
      hist_[i].push_back(x_[i][j]);
    }
  }
  generated_ += k_ + 1;
  r_.timings.drafted += k_;
  // 4. Resample (systematic) when the effective sample size falls below N/2.
  const double mx = *std::max_element(logw_.begin(), logw_.end());
  std::vector<double> w(n_);
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n_; ++i) sum += w[i] = std::exp(logw_[i] - mx);
  for (double& v : w) v /= sum, sum2 += v * v;
  if (n_ > 1 && 1.0 / sum2 < n_ / 2.0) {
    ++resamples_;
    const int other = bank_ == 0 ? n_ : 0;
    const double u = sampler.next_uniform() / n_;
    std::vector<std::vector<int32_t>> nh(n_);
    std::vector<int64_t> nd(n_);
    double cum = w[0];
    for (int i = 0, a = 0; i < n_; ++i) {
      while (u + static_cast<double>(i) / n_ > cum && a + 1 < n_) cum += w[++a];
      nh[i] = hist_[a], nd[i] = dlen_[a];
      copy_positions(tcache_, bank_ + a, other + i, n0 - 1, len + k_);
      copy_positions(dcache_, bank_ + a, other + i, n0 - 1, dlen_[a]);
    }
    hist_.swap(nh), dlen_.swap(nd);
    std::fill(logw_.begin(), logw_.end(), 0.0);
    bank_ = other;
  }
  return true;
}

GenerateResult SmcDecoder::result() {
  GenerateResult r = r_;
  const int best = static_cast<int>(std::max_element(logw_.begin(), logw_.end()) - logw_.begin());
  r.timings.decode_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  StreamDecoder decoder(tok_);
  for (size_t p = prompt_.size(); p < hist_[best].size() && static_cast<int>(r.tokens.size()) < opt_.max_tokens; ++p) {
    const int32_t t = hist_[best][p];
    r.tokens.push_back(t);
    r.text += decoder.push(t);
    if (!opt_.ignore_eos && tok_.is_eog(t)) {
      r.finish_reason = "stop";
      break;
    }
  }
  r.text += decoder.flush();
  r.timings.decode_tokens = static_cast<int>(r.tokens.size());
  return r;
}

}  // namespace brisk
