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
    : target_(target),
      tok_(tokenizer),
      draft_(load_for_generation(draft_path)),
      n_(particles),
      k_(k),
      tcache_(target.cache_shape(2 * std::max(particles, 1), n_ctx)),
      dcache_(draft_.model->cache_shape(2 * std::max(particles, 1), capped_ctx(*draft_.model, n_ctx))) {
  check_same_vocabulary(*draft_.tokenizer, tokenizer, draft_path);
  if (particles < 1 || particles > 64) fail("SMC particles (--spec-particles) must be in [1, 64], got {}", particles);
  if (k < 1) fail("the draft length (--spec-k) must be >= 1, got {}", k);
  if (!target.uses_kv_blocks()) fail("--spec smc needs the CPU model (it copies K/V between cache slots)");
}

GenerateResult SmcDecoder::generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt) {
  if (!(opt.sampling.temperature > 0))
    fail("--spec smc reweights sampled particles: it needs --temp > 0 (greedy has nothing to weigh)");
  const int64_t cap = std::min(tcache_.capacity(), dcache_.capacity());
  if (prompt.empty()) fail("the prompt is empty: at least one token is needed");
  if (static_cast<int64_t>(prompt.size()) + k_ + 1 >= cap)
    fail("the prompt has {} tokens; with --spec-k {} it does not fit the context of {}", prompt.size(), k_, cap);
  if (opt.max_tokens < 0) fail("max tokens must be >= 0, got {}", opt.max_tokens);

  GenerateResult r;
  r.finish_reason = "length";
  resamples_ = 0;
  const int64_t n_vocab = target_.config().n_vocab, n0 = static_cast<int64_t>(prompt.size());
  // Prompt (all but its last token) into slot 0 of both caches, then copied to every slot.
  auto t_prompt = std::chrono::steady_clock::now();
  std::vector<float> logits;
  Batch batch;
  for (int64_t s = 0; s < 2 * n_; ++s) tcache_.truncate(s, 0), dcache_.truncate(s, 0);
  for (int64_t i = 0; i + 1 < n0; i += opt.n_batch) {
    batch.clear();
    for (int64_t j = i; j < std::min(n0 - 1, i + opt.n_batch); ++j)
      batch.add(prompt[static_cast<size_t>(j)], static_cast<int32_t>(j), 0, false);
    target_.forward(batch, tcache_, logits);
    draft_forward(*draft_.model, batch, dcache_, logits);
  }
  for (int64_t s = 1; s < 2 * n_; ++s) copy_positions(tcache_, 0, s, 0, n0 - 1), copy_positions(dcache_, 0, s, 0, n0 - 1);
  r.timings.prompt_tokens = static_cast<int>(n0 - 1);
  r.timings.prompt_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_prompt).count();

  Sampler sampler(opt.sampling);
  SamplingParams dp = opt.sampling;
  dp.seed ^= 0xD1B54A32D192ED03ull;
  Sampler dsampler(dp);
  std::vector<std::vector<int32_t>> hist(n_, prompt);
  std::vector<int64_t> dlen(n_, n0 - 1);  // positions in each particle's draft cache
  std::vector<double> logw(n_, 0.0);
  std::vector<std::vector<int32_t>> x(n_, std::vector<int32_t>(k_));
  std::vector<std::vector<double>> logq(n_, std::vector<double>(k_));
  std::vector<float> row(n_vocab);
  int bank = 0;
  auto t0 = std::chrono::steady_clock::now();
  int64_t generated = 0;
  while (generated < opt.max_tokens && static_cast<int64_t>(hist[0].size()) + k_ + 1 < cap) {
    const int64_t len = static_cast<int64_t>(hist[0].size());  // the same for every particle
    // 1. Each particle drafts k tokens from q (one draft pass per token for all particles).
    for (int j = 0; j < k_; ++j) {
      batch.clear();
      for (int i = 0; i < n_; ++i) {
        const int32_t slot = bank + i;
        if (j == 0)
          for (int64_t p = dlen[i]; p < len; ++p) batch.add(hist[i][static_cast<size_t>(p)], static_cast<int32_t>(p), slot, p + 1 == len);
        else
          batch.add(x[i][j - 1], static_cast<int32_t>(len - 1 + j), slot, true);
      }
      draft_forward(*draft_.model, batch, dcache_, logits);
      for (int i = 0; i < n_; ++i) {
        std::vector<int32_t> h = hist[i];
        h.insert(h.end(), x[i].begin(), x[i].begin() + j);
        std::copy_n(logits.begin() + i * n_vocab, n_vocab, row.begin());
        std::vector<TokenProb> q = dsampler.candidates(row, h);
        x[i][j] = q.size() == 1 ? q[0].id : draw(q, dsampler.next_uniform());
        logq[i][j] = std::log(prob_of(q, x[i][j]));
      }
    }
    // 2. The target scores every particle's last token and guesses in one pass.
    batch.clear();
    for (int i = 0; i < n_; ++i) {
      batch.add(hist[i].back(), static_cast<int32_t>(len - 1), bank + i, true);
      for (int j = 0; j < k_; ++j) batch.add(x[i][j], static_cast<int32_t>(len + j), bank + i, true);
    }
    target_.forward(batch, tcache_, logits);
    ++r.timings.decode_steps;
    // 3. Importance weights, and one more token per particle from the target's p.
    for (int i = 0; i < n_; ++i) {
      dlen[i] = len + k_ - 1;
      for (int j = 0; j <= k_; ++j) {
        std::copy_n(logits.begin() + (i * (k_ + 1) + j) * n_vocab, n_vocab, row.begin());
        std::vector<TokenProb> p = sampler.candidates(row, hist[i]);
        if (j == k_) {
          hist[i].push_back(p.size() == 1 ? p[0].id : draw(p, sampler.next_uniform()));
          break;
        }
        // A guess the target's filters exclude weighs ~0 (floored so a population where
        // every particle has one still has an order).
        logw[i] += std::log(std::max(prob_of(p, x[i][j]), 1e-9)) - logq[i][j];
        hist[i].push_back(x[i][j]);
      }
    }
    generated += k_ + 1;
    r.timings.drafted += k_;
    // 4. Resample (systematic) when the effective sample size falls below N/2.
    const double mx = *std::max_element(logw.begin(), logw.end());
    std::vector<double> w(n_);
    double sum = 0, sum2 = 0;
    for (int i = 0; i < n_; ++i) sum += w[i] = std::exp(logw[i] - mx);
    for (double& v : w) v /= sum, sum2 += v * v;
    if (n_ > 1 && 1.0 / sum2 < n_ / 2.0) {
      ++resamples_;
      const int other = bank == 0 ? n_ : 0;
      const double u = sampler.next_uniform() / n_;
      std::vector<std::vector<int32_t>> nh(n_);
      std::vector<int64_t> nd(n_);
      double cum = w[0];
      for (int i = 0, a = 0; i < n_; ++i) {
        while (u + static_cast<double>(i) / n_ > cum && a + 1 < n_) cum += w[++a];
        nh[i] = hist[a], nd[i] = dlen[a];
        copy_positions(tcache_, bank + a, other + i, n0 - 1, len + k_);
        copy_positions(dcache_, bank + a, other + i, n0 - 1, dlen[a]);
      }
      hist.swap(nh), dlen.swap(nd);
      std::fill(logw.begin(), logw.end(), 0.0);
      bank = other;
    }
  }
  const int best = static_cast<int>(std::max_element(logw.begin(), logw.end()) - logw.begin());
  r.timings.decode_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  StreamDecoder decoder(tok_);
  for (size_t p = prompt.size(); p < hist[best].size() && static_cast<int>(r.tokens.size()) < opt.max_tokens; ++p) {
    const int32_t t = hist[best][p];
    r.tokens.push_back(t);
    r.text += decoder.push(t);
    if (!opt.ignore_eos && tok_.is_eog(t)) {
      r.finish_reason = "stop";
      break;
    }
  }
  r.text += decoder.flush();
  r.timings.decode_tokens = static_cast<int>(r.tokens.size());
  return r;
}

}  // namespace brisk
