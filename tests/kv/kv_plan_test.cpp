// Per-layer KV plans: the solver finds the optimum (checked against brute force on small
// random instances), plan files round-trip and bad ones fail naming the line, and a cache
// built from a plan gives every layer its own codec and eviction budget.
#include "kv/kv_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kv/kv_cache.h"
#include "kv/plan_solver.h"
#include "util/error.h"

namespace brisk {
namespace {

// Least total loss over all choices with total cost <= budget * n_layer (inf if none).
double brute_force(const std::vector<std::vector<PlanOptionScore>>& opts, double budget) {
  const size_t n = opts.size();
  std::vector<size_t> at(n, 0);
  double best = std::numeric_limits<double>::infinity();
  while (true) {
    double cost = 0, loss = 0;
    for (size_t l = 0; l < n; ++l) cost += opts[l][at[l]].cost, loss += opts[l][at[l]].loss;
    if (cost <= budget * static_cast<double>(n) + 1e-12) best = std::min(best, loss);
    size_t l = 0;
    while (l < n && ++at[l] == opts[l].size()) at[l++] = 0;
    if (l == n) return best;
  }
}

TEST(PlanSolver, MatchesBruteForceOnRandomInstances) {
  std::mt19937 rng(17);
  int solved = 0, infeasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n_layer = 1 + rng() % 5, n_opt = 1 + rng() % 4;
    std::vector<std::vector<PlanOptionScore>> opts(n_layer);
    for (auto& layer : opts)
      for (size_t o = 0; o < n_opt; ++o)  // costs on the solver's grid, so both agree exactly
        layer.push_back({static_cast<double>(rng() % (2 * kPlanCostGrid + 1)) / kPlanCostGrid,
                         std::uniform_real_distribution<double>(0, 1)(rng)});
    const double budget = std::uniform_real_distribution<double>(0.05, 1.5)(rng);
    const double want = brute_force(opts, budget);
    if (std::isinf(want)) {
      EXPECT_THROW(solve_layer_options(opts, budget), Error);
      ++infeasible;
      continue;
    }
    const std::vector<int> pick = solve_layer_options(opts, budget);
    ASSERT_EQ(pick.size(), n_layer);
    double cost = 0, loss = 0;
    for (size_t l = 0; l < n_layer; ++l) {
      ASSERT_GE(pick[l], 0);
      ASSERT_LT(static_cast<size_t>(pick[l]), n_opt);
      cost += opts[l][static_cast<size_t>(pick[l])].cost;
      loss += opts[l][static_cast<size_t>(pick[l])].loss;
    }
    EXPECT_LE(cost, budget * static_cast<double>(n_layer) + 1e-9) << "trial " << trial;
    EXPECT_NEAR(loss, want, 1e-12) << "trial " << trial;
    ++solved;
  }
  EXPECT_GT(solved, 100);  // both kinds of instance were exercised
  EXPECT_GT(infeasible, 5);
}

TEST(PlanSolver, GreedyTrapIsSolvedExactly) {
  // Loss per byte saved favours downgrading layer 0 first (0.09 per 0.5 f16 layer), but only
  // layer 1's one big step (0.3 for 1.5) reaches the budget alone: greedy would take both.
  const std::vector<std::vector<PlanOptionScore>> opts{
      {{1.0, 0.0}, {0.5, 0.09}}, {{2.0, 0.0}, {0.5, 0.3}}};
  EXPECT_EQ(solve_layer_options(opts, 0.75), (std::vector<int>{0, 1}));
  EXPECT_THROW(solve_layer_options(opts, 0.4), Error);
}

KvPlan random_plan(std::mt19937& rng) {
  const KvType types[] = {KvType::f32, KvType::f16, KvType::int8, KvType::int4, KvType::int4r,
                          KvType::nsn2};
  const char* policies[] = {"streaming", "h2o", "snapkv", "tova"};
  KvPlan p{policies[rng() % 4], {}};
  const size_t n = 1 + rng() % 30;
  for (size_t l = 0; l < n; ++l)
    p.layers.push_back({types[rng() % 6], std::uniform_real_distribution<double>(1e-3, 1)(rng)});
  p.layers[0].keep = 1;
  return p;
}

TEST(KvPlanFile, RoundTrips) {
  std::mt19937 rng(3);
  for (int i = 0; i < 50; ++i) {
    const KvPlan p = random_plan(rng);
    EXPECT_EQ(parse_kv_plan(format_kv_plan(p, "made by a test\nsecond line"), "test"), p);
  }
  // Layer lines in any order, comments and blank lines anywhere.
  const KvPlan q = parse_kv_plan(
      "# c\npolicy tova\n\nlayers 2 # two\nlayer 1 int8 0.5\nlayer 0 f16 1\n", "test");
  EXPECT_EQ(q, (KvPlan{"tova", {{KvType::f16, 1}, {KvType::int8, 0.5}}}));
}

void expect_error(const std::string& text, const std::string& what) {
  try {
    parse_kv_plan(text, "'p.plan'");
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(KvPlanFile, BadFilesNameTheLineAndTheProblem) {
  const std::string head = "policy snapkv\nlayers 2\n";
  expect_error(head + "layer 0 f16 1\n", "'p.plan': layer 1 has no 'layer' line");
  expect_error(head + "layer 0 f16 1\nlayer 0 f16 1\n", "line 4: layer 0 given twice");
  expect_error(head + "layer 2 f16 1\n", "line 3: layer index 2 out of range [0, 2)");
  expect_error(head + "layer 0 int3 1\n", "line 3: unknown KV type 'int3'");
  expect_error(head + "layer 0 f16 0\n", "line 3: kept share 0 must be in (0, 1]");
  expect_error(head + "layer 0 f16 1.5\n", "line 3: kept share 1.5 must be in (0, 1]");
  expect_error(head + "layer 0 f16 half\n", "line 3: kept share 'half' is not a number");
  expect_error(head + "layer 0 f16\n", "line 3: expected 'layer INDEX TYPE KEEP'");
  expect_error("policy lru\n", "line 1: unknown policy 'lru'");
  expect_error("layers 1\nlayer 0 f16 1\n", "no 'policy' line");
  expect_error("policy h2o\nlayer 0 f16 1\n", "line 2: 'layer' before 'layers N'");
  expect_error("policy h2o\nlayers 1.5\n", "line 2: layer count 1.5 must be a whole number");
  expect_error("policy h2o\nkeep 1\n", "line 2: unknown keyword 'keep'");
  EXPECT_THROW(read_kv_plan("/nonexistent/x.plan"), Error);
}

TEST(KvPlanCache, EveryLayerGetsItsCodecAndBudget) {
  KvCacheShape s{3, 1, 64, 2, 32};
  s.kv_evict = "plan:(test)";
  s.plan = std::make_shared<const KvPlan>(
      KvPlan{"streaming", {{KvType::f16, 1}, {KvType::int8, 0.25}, {KvType::f32, 0.5}}});
  KvCache c(s);
  EXPECT_EQ(c.kv_type(0), KvType::f16);
  EXPECT_EQ(c.kv_type(1), KvType::int8);
  EXPECT_EQ(c.row_bytes(0), 2 * 64);
  EXPECT_EQ(c.row_bytes(1), 2 * (32 + 2));
  EXPECT_EQ(c.row_bytes(2), 2 * 128);
  EXPECT_EQ(c.bytes_per_token(), 2 * (128 + 68 + 256));
  EXPECT_EQ(c.bytes(), static_cast<size_t>(64 * c.bytes_per_token()));
  for (int64_t l = 0; l < 3; ++l) EXPECT_EQ(c.view(l, 0).type, c.kv_type(l));
  EXPECT_NEAR(kv_plan_cost(*s.plan, 32), (1 + 0.25 * 68 / 128.0 + 0.5 * 2) / 3, 1e-12);

  // Feed 40 positions: layer 0 keeps all, layer 1 a quarter, layer 2 half.
  std::vector<float> k(64, 0.5f), v(64, 0.25f), q(4 * 32, 0.1f);
  for (int64_t p = 0; p < 40; ++p) {
    c.check_write(0, p, p);
    for (int64_t l = 0; l < 3; ++l) {
      c.store(l, 0, p, k.data(), v.data());
      c.observe(l, 0, q.data(), 1, p, 4, true);
    }
    c.set_length(0, p + 1);
  }
  EXPECT_EQ(c.n_slots(0, 0), 40);
  EXPECT_EQ(c.n_slots(1, 0), 10);
  EXPECT_EQ(c.n_slots(2, 0), 20);
}

TEST(KvPlanCache, PlansThatDoNotFitFail) {
  KvCacheShape s{2, 1, 16, 2, 32};
  s.kv_evict = "plan:(test)";
  s.plan = std::make_shared<const KvPlan>(KvPlan{"snapkv", {{KvType::f16, 1}}});
  EXPECT_THROW(KvCache{s}, Error);  // one layer for a two-layer model
  s.plan = std::make_shared<const KvPlan>(KvPlan{"snapkv", {{KvType::f16, 1}, {KvType::int4r, 1}}});
  s.head_dim = 48;  // int4r needs a power of two
  EXPECT_THROW(KvCache{s}, Error);
  s.head_dim = 32;
  s.kv_type = KvType::int8;  // --kv-type beside a plan
  EXPECT_THROW(KvCache{s}, Error);
  s.kv_type = KvType::f32;
  s.block_size = 4, s.n_blocks = 8;  // managed (the serving engine), with and without eviction
  EXPECT_NO_THROW(KvCache{s});
  s.plan = std::make_shared<const KvPlan>(KvPlan{"snapkv", {{KvType::f16, 1}, {KvType::f16, 0.5}}});
  EXPECT_TRUE(KvCache{s}.evicting());
  EXPECT_THROW(parse_eviction("plan:"), Error);
}

}  // namespace
}  // namespace brisk
