// Microbenchmark of what the engine does with each generated token's logits: a draw
// (greedy, temperature with OpenAI's defaults, top-p) and the OpenAI logprobs, on 16,384
// random logits (brisk-tiny's vocabulary). The engine runs one per sequence a step.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "engine/logprobs.h"
#include "engine/sampler.h"

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

BENCHMARK_MAIN();
