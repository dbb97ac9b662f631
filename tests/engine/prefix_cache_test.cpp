// Prefix caching through the engine: requests sharing a prompt prefix reuse its KV blocks
// (counted as hits, reported as cached prompt tokens) and produce exactly the output they
// produce without the cache; afterwards no block is in use, the shared ones stay cached.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine_test_util.h"

namespace brisk::test {
namespace {

std::vector<int32_t> ids(const Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> v;
  if (tok.add_bos() && tok.bos() >= 0) v.push_back(tok.bos());
  const auto t = tok.encode(text, false, false);
  v.insert(v.end(), t.begin(), t.end());
  return v;
}

class PrefixCache : public ::testing::TestWithParam<std::string> {};

TEST_P(PrefixCache, SharedPrefixIsReusedAndChangesNothing) {
  LoadedModel& lm = tiny_model();
  const Tokenizer& tok = *lm.tokenizer;
  std::vector<int32_t> shared = ids(tok,
      "You are a helpful assistant. Answer briefly and truthfully. The following are stories "
      "told by children about their day at school, their friends, their pets and the weather. "
      "Once upon a time, in a small village by the sea, there lived a girl named Lily who loved "
      "flowers, and a boy named Tom who had a little dog. Every morning they walked together.");
  ASSERT_GE(shared.size(), 64u);
  shared.resize(64);  // exactly 4 blocks: the tails cannot add a fifth
  const std::vector<std::string> tails = {" to play", " her cat", " the rain and", " big red",
                                          " to sing songs", " her mom"};
  std::vector<CompletionRequest> reqs;
  for (const auto& t : tails) {
    CompletionRequest r;
    r.prompt = shared;
    const auto tail = tok.encode(t, false, false);
    r.prompt.insert(r.prompt.end(), tail.begin(), tail.end());
    r.max_tokens = 20;
    r.sampling = greedy();
    r.ignore_eos = true;
    reqs.push_back(r);
  }
  EngineConfig cfg;
  cfg.n_ctx = 256;
  cfg.block_size = 16;
  std::vector<Collected> want;
  {
    cfg.prefix_cache = "off";
    Engine e(lm, cfg);
    for (const auto& r : reqs) want.push_back(run_one(e, r));
    EXPECT_EQ(e.metrics().prefix_cache_hits, 0u);
  }
  cfg.prefix_cache = GetParam();
  Engine e(lm, cfg);
  const Collected first = run_one(e, reqs[0]);  // cold
  EXPECT_EQ(first.tokens, want[0].tokens);
  EXPECT_EQ(first.last.cached_prompt_tokens, 0);
  EngineMetrics m = settled_metrics(e);
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_GT(m.kv_blocks_cached, 0);
  Collector c(reqs.size() - 1);
  for (size_t i = 1; i < reqs.size(); ++i) e.submit(reqs[i], c.callback(i - 1));
  c.wait();
  const int64_t shared_blocks = static_cast<int64_t>(shared.size()) / 16;
  uint64_t hits = 0;
  for (size_t i = 1; i < reqs.size(); ++i) {
    EXPECT_EQ(c[i - 1].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(c[i - 1].text, want[i].text) << "request " << i;
    EXPECT_EQ(c[i - 1].last.cached_prompt_tokens, shared_blocks * 16) << "request " << i;
    hits += static_cast<uint64_t>(c[i - 1].last.cached_prompt_tokens);
  }
  // The same prompt again: its full blocks are cached, except that the last prompt token
  // is always computed (its logits give the first output token).
  const Collected again = run_one(e, reqs[0]);
  EXPECT_EQ(again.tokens, want[0].tokens);
  EXPECT_EQ(again.last.cached_prompt_tokens,
            static_cast<int>((reqs[0].prompt.size() - 1) / 16 * 16));
  m = settled_metrics(e);
  EXPECT_EQ(m.prefix_cache_hits, hits + static_cast<uint64_t>(again.last.cached_prompt_tokens));
  uint64_t queried = 0;
  for (const auto& r : reqs) queried += r.prompt.size();
  EXPECT_EQ(m.prefix_cache_queries, queried + reqs[0].prompt.size());
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_GT(m.kv_blocks_cached, 0);
  EXPECT_EQ(m.kv_blocks_cached + m.kv_blocks_used, m.kv_blocks_cached);

  // A multi-turn continuation: prompt = first prompt + its answer + more. The answer's
  // blocks were cached as they filled, so the hit goes past the original prompt.
  CompletionRequest turn2 = reqs[0];
  turn2.prompt.insert(turn2.prompt.end(), want[0].tokens.begin(), want[0].tokens.end());
  const auto more = tok.encode(" And then", false, false);
  turn2.prompt.insert(turn2.prompt.end(), more.begin(), more.end());
  const Collected t2 = run_one(e, turn2);
  EXPECT_GT(t2.last.cached_prompt_tokens, static_cast<int>(reqs[0].prompt.size() / 16 * 16));
  cfg.prefix_cache = "off";
  {
    Engine cold(lm, cfg);
    EXPECT_EQ(run_one(cold, turn2).tokens, t2.tokens);
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, PrefixCache, ::testing::Values("lru", "gdsf"));

TEST(PrefixCacheEngine, EvictionUnderPressureKeepsResultsAndFreesBlocks) {
  // A pool barely larger than one sequence: cached blocks must be evicted for new ones.
  LoadedModel& lm = tiny_model();
  const Tokenizer& tok = *lm.tokenizer;
  EngineConfig cfg;
  cfg.n_ctx = 64;
  cfg.block_size = 8;
  cfg.kv_blocks = 10;
  cfg.max_running = 2;
  for (const char* policy : {"lru", "gdsf"}) {
    cfg.prefix_cache = policy;
    Engine e(lm, cfg);
    std::vector<std::vector<int32_t>> outs;
    for (int round = 0; round < 2; ++round)
      for (int i = 0; i < 4; ++i) {
        CompletionRequest r;
        r.prompt = ids(tok, "Story number " + std::to_string(i) + ": once upon a time there was a");
        r.max_tokens = 16;
        r.sampling = greedy();
        r.ignore_eos = true;
        const Collected c = run_one(e, r);
        if (round == 0) outs.push_back(c.tokens);
        else EXPECT_EQ(c.tokens, outs[static_cast<size_t>(i)]) << policy << " " << i;
      }
    const EngineMetrics m = settled_metrics(e);
    EXPECT_EQ(m.kv_blocks_used, 0) << policy;
    EXPECT_LE(m.kv_blocks_cached, 10) << policy;
  }
}

}  // namespace
}  // namespace brisk::test
