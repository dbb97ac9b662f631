#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/thread_pool.h"

namespace brisk {

double log_prob(const float* logits, int64_t n, int32_t target) {
  float mx = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
  return static_cast<double>(logits[target]) - mx - std::log(sum);
}

void log_probs(const float* logits, int64_t n_vocab, const int32_t* targets, int64_t n, double* out) {
  ThreadPool::global().parallel_for(n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) out[i] = log_prob(logits + i * n_vocab, n_vocab, targets[i]);
  });
}

PerplexityResult perplexity(Model& model, const std::vector<int32_t>& tokens, int64_t ctx,
                            int32_t bos, int n_batch,
                            const std::function<void(int64_t, int64_t, double)>& on_window) {
  if (ctx < 4) fail("perplexity context must be at least 4 tokens, got {}", ctx);
  if (n_batch < 1) fail("batch size must be >= 1, got {}", n_batch);
  const int64_t n_windows = static_cast<int64_t>(tokens.size()) / ctx;
  if (n_windows == 0)
    fail("the text has {} tokens, fewer than one window of {} (lower -c)", tokens.size(), ctx);

  const int64_t n_vocab = model.config().n_vocab;
  const int64_t first = ctx / 2;  // first scored position (its logits predict position first+1)
  KvCache cache(model.cache_shape(1, ctx));
  std::vector<float> logits;
  std::vector<double> lp;
  Batch batch;
  double nll = 0;
  int64_t scored = 0;
  PerplexityResult r;
  for (int64_t w = 0; w < n_windows; ++w) {
    const int32_t* win = tokens.data() + w * ctx;
    cache.clear(0);
    for (int64_t start = 0; start < ctx; start += n_batch) {
      int64_t end = std::min(ctx, start + n_batch);
      batch.clear();
      for (int64_t j = start; j < end; ++j) {
        int32_t tok = (j == 0 && bos >= 0) ? bos : win[j];
        batch.add(tok, static_cast<int32_t>(j), 0, j >= first && j + 1 < ctx);
      }
      model.forward(batch, cache, logits);
      // The scored positions j0 .. j1-1 of this batch predict tokens j0+1 .. j1.
      const int64_t j0 = std::max(start, first), j1 = std::min(end, ctx - 1);
      if (j1 <= j0) continue;
      lp.resize(static_cast<size_t>(j1 - j0));
      log_probs(logits.data(), n_vocab, win + j0 + 1, j1 - j0, lp.data());
      for (double x : lp) nll -= x;  // in order: the sum does not depend on the threads
      scored += j1 - j0;
    }
    if (on_window) on_window(w, n_windows, std::exp(nll / scored));
  }
  r.windows = n_windows;
  r.tokens_scored = scored;
  r.nll_per_token = nll / scored;
  r.ppl = std::exp(r.nll_per_token);
  return r;
}

}  // namespace brisk
