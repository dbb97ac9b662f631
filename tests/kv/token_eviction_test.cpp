// Token eviction policies: every policy keeps exactly its budget per KV head, in order,
// and never drops what it must keep (StreamingLLM's sinks and window, SnapKV's observation
// window, H2O's recent half, TOVA's current token). K rows carry their position so the
// test can read back which positions survived the compactions.
#include "kv/token_eviction.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "kv/kv_cache.h"
#include "util/error.h"

namespace brisk {
namespace {

constexpr int64_t kHeads = 2, kDim = 8, kQHeads = 4;

// Feeds `n` positions in chunks of `chunk` (q random), returns the positions each KV head
// holds afterwards (K[0] = position, K[1..] random). `one_prompt`: the chunks are one
// prompt, a token sampled only after the last (else after every chunk, as decode steps);
// `slots`: the last layer's slots in use after each chunk.
std::vector<std::vector<int64_t>> run(const std::string& spec, int64_t n, int64_t chunk,
                                      int64_t layers = 2, bool one_prompt = false,
                                      std::vector<int64_t>* slots = nullptr) {
  KvCacheShape s{layers, 1, 256, kHeads, kDim};
  s.kv_evict = spec;
  KvCache c(s);
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> k(kHeads * kDim), v(kHeads * kDim), q;
  for (int64_t p0 = 0; p0 < n; p0 += chunk) {
    const int64_t m = std::min(chunk, n - p0);
    q.resize(static_cast<size_t>(m * kQHeads * kDim));
    for (auto& x : q) x = g(rng);
    for (int64_t p = p0; p < p0 + m; ++p) c.check_write(0, p, p);  // as Model::forward
    for (int64_t l = 0; l < layers; ++l) {
      for (int64_t p = p0; p < p0 + m; ++p) {
        for (auto& x : k) x = g(rng);
        for (auto& x : v) x = g(rng);
        for (int64_t h = 0; h < kHeads; ++h) k[h * kDim] = static_cast<float>(p);
        c.store(l, 0, p, k.data(), v.data());
      }
      c.observe(l, 0, q.data(), m, p0, kQHeads, !one_prompt || p0 + m == n);
    }
    c.set_length(0, p0 + m);
    if (slots) slots->push_back(c.n_slots(layers - 1, 0));
  }
  std::vector<std::vector<int64_t>> held(kHeads);
  std::vector<float> row(kDim);
  for (int64_t h = 0; h < kHeads; ++h)
    for (int64_t sl = 0; sl < c.n_slots(layers - 1, 0); ++sl) {
      c.decode_k(layers - 1, 0, sl, h, row.data());
      held[h].push_back(static_cast<int64_t>(row[0]));
    }
  return held;
}

void expect_budget_and_order(const std::vector<std::vector<int64_t>>& held, int64_t budget) {
  for (const auto& h : held) {
    EXPECT_EQ(static_cast<int64_t>(h.size()), budget);
    for (size_t i = 1; i < h.size(); ++i) EXPECT_LT(h[i - 1], h[i]);
  }
}

bool holds(const std::vector<int64_t>& h, int64_t p) {
  return std::find(h.begin(), h.end(), p) != h.end();
}

TEST(TokenEviction, StreamingKeepsSinksAndWindow) {
  for (int64_t chunk : {1, 7, 40}) {
    const auto held = run("streaming:20", 100, chunk);
    expect_budget_and_order(held, 20);
    for (const auto& h : held) {
      for (int64_t p = 0; p < 4; ++p) EXPECT_TRUE(holds(h, p)) << "sink " << p;
      for (int64_t p = 84; p < 100; ++p) EXPECT_TRUE(holds(h, p)) << "window " << p;
    }
  }
}

TEST(TokenEviction, ScorePoliciesKeepWhatTheyMust) {
  for (int64_t chunk : {1, 9, 50}) {
    const auto snap = run("snapkv:24", 120, chunk);
    expect_budget_and_order(snap, 24);
    const int64_t window = std::min<int64_t>(8, chunk);  // budget 24: its window has the minimum, 8
    for (const auto& h : snap)  // the last chunk's observation window
      for (int64_t p = 120 - std::min(window, 120 - (120 - 1) / chunk * chunk); p < 120; ++p)
        EXPECT_TRUE(holds(h, p)) << "snapkv window " << p << " chunk " << chunk;
    const auto h2o = run("h2o:24", 120, chunk);
    expect_budget_and_order(h2o, 24);
    for (const auto& h : h2o)
      for (int64_t p = 108; p < 120; ++p) EXPECT_TRUE(holds(h, p)) << "h2o recent " << p;
    const auto tova = run("tova:24", 120, chunk);
    expect_budget_and_order(tova, 24);
    for (const auto& h : tova) EXPECT_TRUE(holds(h, 119));
  }
}

// SnapKV as its paper runs it: the whole prompt is cached, then compressed once by the
// attention of its last queries (the observation window: a question at the end). The
// other policies compress chunk by chunk, bounding the memory of a long prompt.
TEST(TokenEviction, SnapKvCompressesAChunkedPromptOnceAtItsEnd) {
  std::vector<int64_t> slots;
  const auto held = run("snapkv:48", 120, 40, 2, true, &slots);
  EXPECT_EQ(slots, (std::vector<int64_t>{40, 80, 48}));
  expect_budget_and_order(held, 48);
  for (const auto& h : held)
    for (int64_t p = 112; p < 120; ++p) EXPECT_TRUE(holds(h, p)) << "window " << p;  // 8 (budget / 8 < 8)
  slots.clear();
  run("snapkv:48", 120, 40, 2, false, &slots);  // a token sampled after every chunk
  EXPECT_EQ(slots, (std::vector<int64_t>{40, 48, 48}));
  slots.clear();
  run("h2o:48", 120, 40, 2, true, &slots);  // compresses every chunk of the prompt
  EXPECT_EQ(slots, (std::vector<int64_t>{40, 48, 48}));
}

TEST(TokenEviction, FractionBudgetsAndNothingToEvict) {
  const auto held = run("tova:0.25", 100, 10);
  expect_budget_and_order(held, 25);
  const auto all = run("h2o:200", 100, 10);  // budget above the length: all kept
  for (const auto& h : all) {
    ASSERT_EQ(h.size(), 100u);
    for (int64_t p = 0; p < 100; ++p) EXPECT_EQ(h[p], p);
  }
}

TEST(TokenEviction, RefreeChoosesItsOwnBudgetAtPrefill) {
  const auto held = run("refree", 100, 50);
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].size(), held[1].size());
  EXPECT_LT(held[0].size(), 100u);  // random queries spread attention: some positions go
  EXPECT_GT(held[0].size(), 4u);
  for (const auto& h : held) EXPECT_TRUE(holds(h, 99));
  const auto decode = run("refree", 40, 1);  // decode steps never evict
  EXPECT_EQ(decode[0].size(), 40u);
}

TEST(TokenEviction, BadSpecsAndRollback) {
  EXPECT_THROW(parse_eviction("snapkv"), Error);
  EXPECT_THROW(parse_eviction("snapkv:0"), Error);
  EXPECT_THROW(parse_eviction("snapkv:1.5"), Error);
  EXPECT_THROW(parse_eviction("lru:0.5"), Error);
  EXPECT_EQ(parse_eviction("tova:128").budget.tokens, 128);
  EXPECT_EQ(parse_eviction("none").policy, "none");
  KvCacheShape s{1, 1, 16, 1, 8, 4, 4};  // managed (the serving engine)
  s.kv_evict = "streaming:8";
  EXPECT_TRUE(KvCache(s).evicting());
  s.kv_evict = "refree:3";
  EXPECT_THROW(KvCache c(s), Error);
}

}  // namespace
}  // namespace brisk
