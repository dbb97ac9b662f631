// Microbenchmark of what the engine does with each generated token's logits: a draw
// (greedy, temperature with OpenAI's defaults, top-p) and the OpenAI logprobs, on 16,384
// random logits (brisk-tiny's vocabulary). The engine runs one per sequence a step.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "engine/logprobs.h"
#include "engine/sampler.h"
#include "engine/speculative_decoder.h"

namespace {

using namespace brisk;

std::vector<float> random_logits() {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0, 3);
  std::vector<float> l(16384);
  for (float& v : l) v = nd(rng);
  return l;
}

// args: temperature x 10, top_p x 100, OpenAI's frequency and presence penalties (0.5 each,
// over a 2,048-token history) or none
void BM_sample(benchmark::State& st) {
  SamplingParams p;
  p.temperature = static_cast<float>(st.range(0)) / 10;
  p.top_p = static_cast<float>(st.range(1)) / 100;
  p.top_k = 0;
  p.min_p = 0;
  if (st.range(2)) p.frequency_penalty = p.presence_penalty = 0.5f;
  Sampler s(p);
  const std::vector<float> base = random_logits();
  std::vector<float> l(base.size());
  std::vector<int32_t> history(2048);
  for (size_t i = 0; i < history.size(); ++i) history[i] = static_cast<int32_t>((i * 7919) % 3000);
  for (auto _ : st) {
    l = base;  // sample() changes the logits in place
    benchmark::DoNotOptimize(s.sample(l, history));
  }
}
BENCHMARK(BM_sample)->Args({0, 100, 0})->Args({10, 100, 0})->Args({10, 95, 0})->Args({7, 90, 0})->Args({0, 100, 1})->Unit(benchmark::kMicrosecond);

// `brisk run` and `brisk chat`'s defaults (llama.cpp's): temperature 0.8, top-k 40, top-p
// 0.95, min-p 0.05.
void BM_sample_cli_defaults(benchmark::State& st) {
  Sampler s{SamplingParams{}};
  const std::vector<float> base = random_logits();
  std::vector<float> l(base.size());
  const std::vector<int32_t> history(64, 5);
  for (auto _ : st) {
    l = base;
    benchmark::DoNotOptimize(s.sample(l, history));
  }
}
BENCHMARK(BM_sample_cli_defaults)->Unit(benchmark::kMicrosecond);

// args: top_logprobs
void BM_logprobs(benchmark::State& st) {
  const std::vector<float> l = random_logits();
  std::vector<TokenLogprob> top;
  int32_t tok = 0;
  for (auto _ : st) {
    benchmark::DoNotOptimize(token_logprobs(l, tok, static_cast<int>(st.range(0)), top));
    tok = (tok + 1) % 16384;
  }
}
BENCHMARK(BM_logprobs)->Arg(0)->Arg(5)->Arg(20)->Unit(benchmark::kMicrosecond);

}  // namespace

// Speculative verification of one drafted token at temperature 1 (no top-k), p and the
// draft's q both over the whole vocabulary: the guess is the token p likes least, so the
// draft is rejected (nearly always) and the residual max(0, p - q) is drawn.
void BM_verify_rejected_draft(benchmark::State& st) {
  SamplingParams p;
  p.temperature = 1, p.top_k = 0, p.top_p = 1, p.min_p = 0, p.seed = 3;
  Sampler s(p);
  const std::vector<float> base = random_logits();
  const int64_t n = static_cast<int64_t>(base.size());
  std::vector<float> rows(2 * base.size());
  std::copy(base.begin(), base.end(), rows.begin());
  std::copy(base.begin(), base.end(), rows.begin() + n);
  DraftToken d;
  d.id = static_cast<int32_t>(std::min_element(base.begin(), base.end()) - base.begin());
  std::vector<float> ql(base.rbegin(), base.rend());  // a different distribution
  d.q = s.candidates(ql, {});
  std::vector<int32_t> history;
  for (auto _ : st) {
    history.clear();
    benchmark::DoNotOptimize(verify_drafts(s, rows, n, std::span<const DraftToken>(&d, 1), history));
  }
}
BENCHMARK(BM_verify_rejected_draft)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
