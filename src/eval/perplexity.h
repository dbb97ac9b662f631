// Perplexity with llama.cpp's llama-perplexity protocol, so figures compare across
// engines: the token stream is cut into floor(n / ctx) non-overlapping windows of ctx
// tokens, each evaluated from an empty cache; only the second half of each window is
// scored (every scored token then has at least ctx/2 tokens of context).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "model/model.h"

namespace brisk {

struct PerplexityResult {
  double ppl = 0;
  double nll_per_token = 0;
  int64_t tokens_scored = 0;
  int64_t windows = 0;
};

// `bos` >= 0: the first token of every window is replaced by it (llama-perplexity does
// this when the vocabulary adds BOS). on_window(i, n, running_ppl) reports progress.
PerplexityResult perplexity(Model& model, const std::vector<int32_t>& tokens, int64_t ctx,
                            int32_t bos, int n_batch,
                            const std::function<void(int64_t, int64_t, double)>& on_window = {});

// log-softmax of `target` over n logits, in double.
double log_prob(const float* logits, int64_t n, int32_t target);

// log_prob of n rows of logits (n_vocab apart) at their targets, into out, over the thread
// pool: on one thread, the double-precision softmax of a window's 511 scored rows was ~8%
// of a 2-thread `brisk ppl` of brisk-tiny (perf), idling the other core.
void log_probs(const float* logits, int64_t n_vocab, const int32_t* targets, int64_t n, double* out);

}  // namespace brisk
