// GoodputDraftCap: on a synthetic cost model (noisy goodput per cap that peaks at a
// different cap for one sequence and for many) it settles on each bucket's best cap,
// keeps the buckets apart, and moves when the best cap changes.
#include <gtest/gtest.h>

#include <random>

#include "engine/goodput_draft_cap.h"

namespace brisk::test {
namespace {

// Share of `steps` choices that picked `want`, each step answered by `goodput(cap)` +-10%.
template <class F>
double share_of(GoodputDraftCap& cap, int n_spec, int want, int steps, F goodput, std::mt19937& rng) {
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  int hits = 0;
  for (int i = 0; i < steps; ++i) {
    const int c = cap.choose(n_spec);
    hits += c == want;
    cap.observe(static_cast<int64_t>(goodput(c) * noise(rng)), 1.0);
  }
  return static_cast<double>(hits) / steps;
}

TEST(GoodputDraftCap, SettlesOnTheBestCapPerBucketAndFollowsChanges) {
  GoodputDraftCap cap(3);
  std::mt19937 rng(5);
  // One sequence: longer drafts pay up to 4. Sixteen: every guess costs more than it gives.
  auto alone = [](int c) { return std::vector<double>{80, 120, 150, 170, 160}[c == 8 ? 4 : c == 4 ? 3 : c]; };
  auto crowd = [](int c) { return std::vector<double>{400, 330, 300, 220, 150}[c == 8 ? 4 : c == 4 ? 3 : c]; };
  EXPECT_EQ(GoodputDraftCap::bucket(1), 0);
  EXPECT_EQ(GoodputDraftCap::bucket(16), 4);
  EXPECT_EQ(GoodputDraftCap::bucket(9), 4);
  EXPECT_EQ(GoodputDraftCap::bucket(17), 5);
  EXPECT_GT(share_of(cap, 1, 4, 400, alone, rng), 0.85);
  EXPECT_GT(share_of(cap, 16, 0, 400, crowd, rng), 0.85);
  EXPECT_NEAR(cap.goodput(0, 3), 170, 15);
  EXPECT_NEAR(cap.goodput(4, 0), 400, 30);
  // Sixteen started from one sequence's best cap (4), not from 8.
  EXPECT_EQ(cap.goodput(4, 4), 0);
  // What a token saves at the best cap: one sequence's cap 4 against plain (tried though
  // the climb had stopped at cap 2), none for sixteen, unknown where nothing was tried.
  EXPECT_NEAR(cap.saved_per_token(1), 1 / cap.goodput(0, 0) - 1 / cap.goodput(0, 3), 1e-12);
  EXPECT_GT(cap.saved_per_token(1), 0.004);
  EXPECT_EQ(cap.saved_per_token(16), 0);
  EXPECT_EQ(cap.saved_per_token(40), -1);
  // The verification pass got cheaper: now cap 2 is best for sixteen.
  auto cheaper = [](int c) { return std::vector<double>{400, 450, 520, 380, 200}[c == 8 ? 4 : c == 4 ? 3 : c]; };
  share_of(cap, 16, 2, 20000, cheaper, rng);  // found by the re-tries of neighbours: 0 -> 1 -> 2
  EXPECT_GT(share_of(cap, 16, 2, 400, cheaper, rng), 0.85);
  // ...and the one-sequence bucket kept what it learned.
  EXPECT_GT(share_of(cap, 1, 4, 200, alone, rng), 0.85);
}

}  // namespace
}  // namespace brisk::test
