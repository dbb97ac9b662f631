#include "eval/kv_quality.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "eval/perplexity.h"
#include "util/error.h"

namespace brisk {

double kl_divergence(const float* p, const float* q, int64_t n) {
  const float mp = *std::max_element(p, p + n), mq = *std::max_element(q, q + n);
  double sp = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sp += std::exp(static_cast<double>(p[i]) - mp);
    sq += std::exp(static_cast<double>(q[i]) - mq);
  }
  const double lp = std::log(sp), lq = std::log(sq);
  double kl = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = p[i] - mp - lp, b = q[i] - mq - lq;  // log-probabilities
    kl += std::exp(a) * (a - b);
  }
  return std::max(0.0, kl);
}

void window_scored_logits(Model& model, KvCache& cache, const int32_t* win, int64_t ctx,
                          int32_t bos, int n_batch, std::vector<float>& out) {
  const int64_t n_vocab = model.config().n_vocab, first = ctx / 2;
  cache.clear(0);
  out.clear();
  std::vector<float> logits;
  Batch batch;
  for (int64_t start = 0; start < ctx; start += n_batch) {
    const int64_t end = std::min(ctx, start + n_batch);
    batch.clear();
    int64_t scored = 0;
    for (int64_t j = start; j < end; ++j) {
      const bool score = j >= first && j + 1 < ctx;
      // The window's last token has nothing to score, but its logits are asked for too:
      // that marks the last chunk as followed by sampling, so every policy (SnapKV waits
      // for sampling) compresses it and the cache ends the window at its budget.
      batch.add((j == 0 && bos >= 0) ? bos : win[j], static_cast<int32_t>(j), 0, score || j + 1 == ctx);
      scored += score;
    }
    model.forward(batch, cache, logits);
    out.insert(out.end(), logits.begin(), logits.begin() + scored * n_vocab);
  }
}

KvQualityResult kv_quality(Model& model, const std::vector<int32_t>& tokens, int64_t ctx,
                           int32_t bos, int n_batch, KvType exact, KvType type,
                           int64_t max_windows) {
  if (ctx < 4) fail("KV quality: context must be at least 4 tokens, got {}", ctx);
  if (n_batch < 1) fail("batch size must be >= 1, got {}", n_batch);
  int64_t n_windows = static_cast<int64_t>(tokens.size()) / ctx;
  if (n_windows == 0)
    fail("the text has {} tokens, fewer than one window of {} (lower --ctx)", tokens.size(), ctx);
  if (max_windows > 0) n_windows = std::min(n_windows, max_windows);

  const int64_t n_vocab = model.config().n_vocab, first = ctx / 2;
  KvCacheShape se = model.cache_shape(1, ctx), sc = se;
  se.kv_type = exact;
  se.kv_evict = "none";  // the reference keeps everything
  se.plan = nullptr;
  sc.kv_type = type;
  KvCache ce(se), cc(sc);
  std::vector<float> le, lc;
  std::vector<double> klds, lp_e, lp_c;
  double nll_e = 0, nll_c = 0, seconds = 0;
  int64_t agree = 0;
  double kept = 0;
  for (int64_t w = 0; w < n_windows; ++w) {
    const int32_t* win = tokens.data() + w * ctx;
    window_scored_logits(model, ce, win, ctx, bos, n_batch, le);
    const auto t0 = std::chrono::steady_clock::now();
    window_scored_logits(model, cc, win, ctx, bos, n_batch, lc);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const int64_t n_scored = ctx - 1 - first;
    lp_e.resize(static_cast<size_t>(n_scored));
    lp_c.resize(static_cast<size_t>(n_scored));
    log_probs(le.data(), n_vocab, win + first + 1, n_scored, lp_e.data());
    log_probs(lc.data(), n_vocab, win + first + 1, n_scored, lp_c.data());
    for (int64_t k = 0; k < n_scored; ++k) {
      const float* pe = &le[k * n_vocab];
      const float* pc = &lc[k * n_vocab];
      nll_e -= lp_e[k];
      nll_c -= lp_c[k];
      klds.push_back(kl_divergence(pe, pc, n_vocab));
      agree += std::max_element(pe, pe + n_vocab) - pe == std::max_element(pc, pc + n_vocab) - pc;
    }
    for (int64_t l = 0; l < sc.n_layer; ++l)
      kept += static_cast<double>(cc.n_slots(l, 0)) / static_cast<double>(ctx * sc.n_layer);
  }
  const double kept_share = kept / static_cast<double>(n_windows);
  KvQualityResult r;
  r.windows = n_windows;
  r.tokens_scored = static_cast<int64_t>(klds.size());
  const double n = static_cast<double>(r.tokens_scored);
  r.ppl_exact = std::exp(nll_e / n);
  r.ppl = std::exp(nll_c / n);
  double sum = 0;
  for (double x : klds) sum += x;
  r.kld = sum / n;
  std::sort(klds.begin(), klds.end());
  r.kld_p99 = klds[std::min(klds.size() - 1, static_cast<size_t>(0.99 * n))];
  r.top1_agree = static_cast<double>(agree) / n;
  r.tokens_per_s = seconds > 0 ? static_cast<double>(n_windows * ctx) / seconds : 0;
  r.kept_share = kept_share;
  return r;
}

}  // namespace brisk
