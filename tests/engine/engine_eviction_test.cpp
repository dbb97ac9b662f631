// Token eviction (--kv-evict) in the serving engine: the paged block table holds slots,
// so a sequence keeps about its budget's worth of blocks however long it gets, and the
// output is the single-sequence Generator's with the same policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "engine/engine.h"
#include "engine/generator.h"
#include "engine_test_util.h"
#include "util/error.h"

namespace brisk::test {
namespace {

// Its own copy of the model: the eviction setting belongs to the model's caches.
LoadedModel& evicting_tiny() {
  static LoadedModel m = [] {
    LoadedModel lm = load_for_generation(BRISK_SOURCE_DIR "/models/brisk-tiny-q8_0.gguf");
    lm.model->set_kv_evict("streaming:64");
    return lm;
  }();
  return m;
}

TEST(EngineEviction, EqualsGeneratorAndHoldsTheBudgetsBlocks) {
  LoadedModel& lm = evicting_tiny();
  std::vector<int32_t> prompt;
  for (int j = 0; j < 300; ++j) prompt.push_back(100 + (j * 37) % 5000);
  GenerateOptions o;
  o.max_tokens = 60;
  o.sampling = greedy();
  o.ignore_eos = true;
  GenerateResult want;
  {
    Generator g(*lm.model, *lm.tokenizer, 512);
    want = g.generate(prompt, o);
  }
  ASSERT_EQ(want.tokens.size(), 60u);

  EngineConfig cfg;
  cfg.n_ctx = 512;
  cfg.block_size = 16;
  Engine e(lm, cfg);
  CompletionRequest r;
  r.prompt = prompt;
  r.max_tokens = 60;
  r.sampling = greedy();
  r.ignore_eos = true;
  Collector c(1);
  auto inner = c.callback(0);
  std::atomic<int64_t> most_blocks{0};
  int events = 0;
  e.submit(r, [&](const StreamEvent& ev) {
    // From the third token on, the metrics show steps after the prompt was compacted.
    if (++events >= 3) most_blocks = std::max<int64_t>(most_blocks, e.metrics().kv_blocks_used);
    inner(ev);
  });
  c.wait();
  EXPECT_EQ(c[0].tokens, want.tokens);
  // After each step the 64 kept slots fill 4 blocks of 16 (a step may hold a fifth while
  // its new token is stored); without eviction the sequence would reach 23.
  EXPECT_LE(most_blocks.load(), 5);
  EXPECT_GE(most_blocks.load(), 4);
  EXPECT_EQ(settled_metrics(e).kv_blocks_used, 0);
}

TEST(EngineEviction, RefusesSpeculation) {
  LoadedModel& lm = evicting_tiny();
  EngineConfig cfg;
  cfg.n_ctx = 256;
  cfg.speculative.method = "lookup";
  EXPECT_THROW(Engine(lm, cfg), Error);
  cfg.speculative.method = "none";
  Engine e(lm, cfg);
  CompletionRequest r;
  r.prompt = {100, 200, 300};
  r.max_tokens = 4;
  r.sampling = greedy();
  SpecOptions spec;
  spec.method = "lookup";
  r.speculative = spec;
  EXPECT_THROW(e.submit(r, [](const StreamEvent&) {}), Error);
  r.speculative.reset();
  EXPECT_EQ(run_one(e, r).tokens.size(), 4u);
}

}  // namespace
}  // namespace brisk::test
