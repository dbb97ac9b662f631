// Generation throughput through the Engine API: 16 concurrent requests vs one at a time
// on brisk-tiny. A measurement, not a check (timing on shared machines is noisy): run with
//   test_engine --gtest_also_run_disabled_tests --gtest_filter='*Throughput*'
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "engine/engine.h"
#include "kernels/kv_format.h"
#include "util/thread_pool.h"
#include "engine_test_util.h"

namespace brisk::test {
namespace {

// BRISK_TEST_TEMP=T samples at temperature T with OpenAI's other defaults (top_p 1, no top-k
// or min-p), as a client that sets nothing gets from `brisk serve`; default greedy.
SamplingParams test_sampling() {
  SamplingParams p = greedy();
  if (const char* t = std::getenv("BRISK_TEST_TEMP")) {
    p.temperature = static_cast<float>(std::atof(t));
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
  }
  return p;
}

double generate(Engine& e, int n_concurrent, int prompt_len, int gen_len) {
  std::vector<CompletionRequest> reqs;
  for (int i = 0; i < n_concurrent; ++i) {
    CompletionRequest r;
    for (int j = 0; j < prompt_len; ++j) r.prompt.push_back(100 + (i * 131 + j * 7) % 5000);
    r.max_tokens = gen_len;
    r.sampling = test_sampling();
    r.sampling.seed = static_cast<uint64_t>(i);
    r.ignore_eos = true;
    reqs.push_back(r);
  }
  Collector c(reqs.size());
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < reqs.size(); ++i) e.submit(reqs[i], c.callback(i));
  c.wait();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return n_concurrent * gen_len / s;
}

TEST(EngineThroughput, DISABLED_SixteenConcurrentVsOne) {
  LoadedModel& lm = tiny_model();
  EngineConfig cfg;
  cfg.n_ctx = 512;
  cfg.max_running = 16;
  cfg.prefix_cache = "off";
  // Env knobs for measuring by hand: BRISK_TEST_THREADS (default: all cores), BRISK_TEST_KV
  // (a --kv-type; default f32), BRISK_TEST_TEMP (above). The type must be set before the
  // Engine makes its cache.
  if (const char* t = std::getenv("BRISK_TEST_THREADS")) ThreadPool::set_global_threads(std::atoi(t));
  if (const char* kv = std::getenv("BRISK_TEST_KV")) lm.model->set_kv_type(parse_kv_type(kv));
  Engine e(lm, cfg);
  generate(e, 1, 32, 16);  // warm up
  // With 128-token prompts, and with 8-token ones (generation alone, nearly).
  for (int prompt : {128, 8}) {
    const double one = generate(e, 1, prompt, 128);
    const double sixteen = generate(e, 16, prompt, 128);
    std::printf("brisk-tiny q8_0, prompt %d, 128 generated: 1 request %.1f tok/s, 16 concurrent "
                "%.1f tok/s (%.2fx)\n", prompt, one, sixteen, sixteen / one);
    EXPECT_GT(sixteen, one);
  }
}

// Time to first token of requests sharing a 1,000-token prefix, one after another, with
// and without the prefix cache.
double mean_ttft_ms(const std::string& policy) {
  LoadedModel& lm = tiny_model();
  EngineConfig cfg;
  cfg.n_ctx = 1100;
  cfg.max_running = 4;
  cfg.prefix_cache = policy;
  Engine e(lm, cfg);
  std::vector<int32_t> prefix;
  for (int j = 0; j < 1000; ++j) prefix.push_back(100 + (j * 7919) % 8000);
  double total = 0;
  const int n = 8;
  for (int i = 0; i <= n; ++i) {
    CompletionRequest r;
    r.prompt = prefix;
    for (int j = 0; j < 20; ++j) r.prompt.push_back(200 + i * 20 + j);
    r.max_tokens = 1;
    r.sampling = greedy();
    const auto t0 = std::chrono::steady_clock::now();
    run_one(e, r);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) total += ms;  // the first one fills the cache
  }
  return total / n;
}

TEST(EngineThroughput, DISABLED_SharedPrefixTtft) {
  const double off = mean_ttft_ms("off"), lru = mean_ttft_ms("lru"), gdsf = mean_ttft_ms("gdsf");
  std::printf("brisk-tiny q8_0, 1000-token shared prefix + 20: TTFT off %.1f ms, lru %.1f ms "
              "(%.2fx), gdsf %.1f ms (%.2fx)\n", off, lru, lru / off, gdsf, gdsf / off);
  EXPECT_LT(lru, off);
}

}  // namespace
}  // namespace brisk::test
