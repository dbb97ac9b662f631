// How much a compressed KV cache changes the model's predictions on a text: perplexity of
// both runs and the KL divergence of the compressed run's next-token distributions from
// the exact run's (users trust KLD more than perplexity for KV quantization: perplexity
// can hide errors that cancel, KLD cannot). Same windows and scoring as perplexity.h
// (llama-perplexity protocol: second half of each window of ctx tokens).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/kv_format.h"
#include "model/model.h"

namespace brisk {

struct KvQualityResult {
  double ppl_exact = 0, ppl = 0;  // exact cache, compressed cache
  double kld = 0;                 // mean KL(P_exact || P_compressed) per scored token, nats
  double kld_p99 = 0;             // 99th percentile of the per-token KLD
  double top1_agree = 0;          // share of tokens where both argmaxes agree
  int64_t tokens_scored = 0, windows = 0;
  double tokens_per_s = 0;        // forward throughput of the compressed run (prefill)
  double kept_share = 1;          // positions the compressed cache holds at the end of a
                                  // window / the window (token eviction), layer mean
};

// Runs every window twice, with an `exact`-type cache that keeps every token and a `type`
// cache with the model's token eviction (Model::cache_shape). max_windows > 0 caps
// the windows evaluated (from the start of the text).
KvQualityResult kv_quality(Model& model, const std::vector<int32_t>& tokens, int64_t ctx,
                           int32_t bos, int n_batch, KvType exact, KvType type,
                           int64_t max_windows = 0);

// Runs one window of ctx tokens from an empty slot 0 of `cache`, n_batch tokens per
// forward pass (bos >= 0 replaces the first token), and sets `out` to the logits of its
// scored tokens: positions ctx/2 .. ctx-2 (each predicting the next), n_vocab floats each.
void window_scored_logits(Model& model, KvCache& cache, const int32_t* window, int64_t ctx,
                          int32_t bos, int n_batch, std::vector<float>& out);

// KL(p || q) of the softmaxes of two logit rows, in nats (double precision).
double kl_divergence(const float* logits_p, const float* logits_q, int64_t n);

}  // namespace brisk
