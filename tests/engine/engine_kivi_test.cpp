// KIVI's 4-bit KV (--kv-type kivi4) in the serving engine: K is quantized per channel over
// groups of 32 positions, so blocks hold whole groups and a sequence's newest positions
// sit in its slot's exact residual. Whatever the batching, prefix sharing or speculative
// rollback, each request's greedy output must be the single-sequence Generator's.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/generator.h"
#include "engine_test_util.h"
#include "kernels/kv_format.h"
#include "util/error.h"

namespace brisk::test {
namespace {

LoadedModel& kivi_tiny() {
  static LoadedModel m = [] {
    LoadedModel lm = load_for_generation(BRISK_SOURCE_DIR "/models/brisk-tiny-q8_0.gguf");
    lm.model->set_kv_type(KvType::kivi4);
    return lm;
  }();
  return m;
}

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> p;
  for (int j = 0; j < n; ++j) p.push_back(100 + (j * 37 + salt * (j >= 70 ? 11 : 0)) % 5000);
  return p;
}

CompletionRequest request(const std::vector<int32_t>& p, const char* spec) {
  CompletionRequest r;
  r.prompt = p;
  r.max_tokens = 40;
  r.sampling = greedy();
  r.ignore_eos = true;
  SpecOptions s;
  s.method = spec;
  r.speculative = s;
  return r;
}

TEST(EngineKivi, EqualsGeneratorWithPrefixSharingAndRollback) {
  LoadedModel& lm = kivi_tiny();
  // Prompts 1 and 2 share their first 70 tokens (two full blocks of 32 are cached).
  const std::vector<std::vector<int32_t>> prompts = {prompt(100, 0), prompt(100, 1), prompt(45, 2)};
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : prompts) {
    Generator g(*lm.model, *lm.tokenizer, 256);
    GenerateOptions o;
    o.max_tokens = 40;
    o.sampling = greedy();
    o.ignore_eos = true;
    want.push_back(g.generate(p, o).tokens);
  }
  EngineConfig cfg;
  cfg.n_ctx = 256;
  cfg.block_size = kKiviGroup;
  Engine e(lm, cfg);
  EXPECT_EQ(run_one(e, request(prompts[0], "none")).tokens, want[0]);
  Collector c(3);  // together; the second reuses the first's cached blocks
  const char* spec[] = {"none", "lookup", "none"};  // lookup: rejected guesses rolled back
  for (size_t i = 0; i < 3; ++i) e.submit(request(prompts[i], spec[i]), c.callback(i));
  c.wait();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(c[i].tokens, want[i]) << "request " << i;
  const EngineMetrics m = settled_metrics(e);
  EXPECT_GT(m.prefix_cache_hits, 0u);
  EXPECT_EQ(m.kv_blocks_used, 0);
}

TEST(EngineKivi, RefusesBlocksThatSplitAGroup) {
  EngineConfig cfg;
  cfg.n_ctx = 256;
  cfg.block_size = 16;
  EXPECT_THROW(Engine(kivi_tiny(), cfg), Error);
}

}  // namespace
}  // namespace brisk::test
