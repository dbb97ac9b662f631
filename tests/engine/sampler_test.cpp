#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <limits>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "util/error.h"

namespace brisk {
namespace {

SamplingParams plain(float temp) {
  SamplingParams p;
  p.temperature = temp;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  return p;
}

std::vector<float> random_logits(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 3);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(Sampler, GreedyIsArgmax) {
  for (uint32_t seed = 0; seed < 20; ++seed) {
    auto l = random_logits(1000, seed);
    int32_t want = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    Sampler s(plain(0));
    EXPECT_EQ(s.sample(l, {}), want);
  }
}

TEST(Sampler, ArgmaxTakesTheFirstOfTiesAndSkipsNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 2, 3}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-5, nan, -7, -1, nan}), 3);
  EXPECT_EQ(argmax(std::vector<float>{nan, 1, 2}), 0);  // as the one-pass loop did
  EXPECT_EQ(argmax(std::vector<float>{-std::numeric_limits<float>::infinity()}), 0);
}

// The sampler's argmax (the active ISA's kernel, tests/kernels/ops_test.cpp checks every
// ISA) against a plain scan on fresh random logits: every length around the lane widths,
// NaNs sprinkled in (never the first), ties of the maximum.
TEST(Sampler, ArgmaxMatchesAPlainScan) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(-4, 4);
  for (size_t n : {1, 2, 15, 16, 17, 31, 33, 100, 16384}) {
    for (int rep = 0; rep < 20; ++rep) {
      std::vector<float> l(n);
      for (float& v : l) v = std::round(u(rng) * 4) / 4;  // coarse values: ties happen
      for (size_t i = 1; i < n; i += 7 + rng() % 20) l[i] = std::numeric_limits<float>::quiet_NaN();
      size_t want = 0;
      for (size_t i = 1; i < n; ++i)
        if (l[i] > l[want]) want = i;
      ASSERT_EQ(argmax(l), static_cast<int32_t>(want)) << "n " << n;
    }
  }
}

TEST(Sampler, TopKOneIsArgmaxAtAnyTemperature) {
  auto l = random_logits(500, 7);
  int32_t want = argmax(l);
  SamplingParams p = plain(5.0f);
  p.top_k = 1;
  Sampler s(p);
  for (int i = 0; i < 50; ++i) {
    auto c = l;
    EXPECT_EQ(s.sample(c, {}), want);
  }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  auto run = [](uint64_t seed) {
    SamplingParams p = plain(1.0f);
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      auto l = random_logits(300, i);
      out.push_back(s.sample(l, out));
    }
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, DrawsFollowSoftmaxWithTemperature) {
  // 4 tokens; with T = 2 the probabilities are softmax(l / 2). Chi-square with 3 degrees of
  // freedom over 40,000 draws: the 0.999 quantile is 16.27.
  std::vector<float> base = {2.0f, 1.0f, 0.0f, -1.0f};
  SamplingParams p = plain(2.0f);
  p.seed = 123;
  Sampler s(p);
  std::vector<int> count(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    auto l = base;
    ++count[s.sample(l, {})];
  }
  double z = 0;
  for (float x : base) z += std::exp(x / 2.0);
  double chi2 = 0;
  for (int i = 0; i < 4; ++i) {
    double e = n * std::exp(base[i] / 2.0) / z;
    chi2 += (count[i] - e) * (count[i] - e) / e;
  }
  EXPECT_LT(chi2, 16.27);
}

TEST(Sampler, TopPKeepsSmallestPrefixReachingMass) {
  // probabilities at T=1: log-probs chosen so p = {0.5, 0.3, 0.15, 0.05}
  std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p = plain(1.0f);
  p.top_p = 0.79f;  // 0.5 + 0.3 reaches it (0.8 itself sits on a rounding edge)
  Sampler s(p);
  auto c = s.candidates(l, {});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].id, 0);
  EXPECT_EQ(c[1].id, 1);
  EXPECT_NEAR(c[0].p, 0.5 / 0.8, 1e-5);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p = plain(1.0f);
  p.min_p = 0.25f;  // keep p >= 0.125
  Sampler s(p);
  auto c = s.candidates(l, {});
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].id, 2);
}

// The plain reference: sort the whole vocabulary, then top-k, softmax, top-p, min-p.
std::vector<TokenProb> reference_candidates(const std::vector<float>& l, const SamplingParams& p) {
  std::vector<int32_t> ids(l.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[a] != l[b] ? l[a] > l[b] : a < b; });
  if (p.top_k > 0 && size_t(p.top_k) < ids.size()) ids.resize(p.top_k);
  std::vector<double> prob(ids.size());
  double sum = 0;
  for (size_t i = 0; i < ids.size(); ++i) sum += prob[i] = std::exp((double(l[ids[i]]) - l[ids[0]]) / p.temperature);
  size_t keep = ids.size();
  double cum = 0;
  for (size_t i = 0; i < ids.size() && p.top_p < 1; ++i)
    if ((cum += prob[i] / sum) >= p.top_p) {
      keep = i + 1;
      break;
    }
  for (size_t i = 1; i < keep; ++i)
    if (prob[i] < p.min_p * prob[0]) keep = i;
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += prob[i];
  std::vector<TokenProb> out;
  for (size_t i = 0; i < keep; ++i) out.push_back({ids[i], float(prob[i] / kept)});
  return out;
}

TEST(Sampler, CandidatesEqualTheFullSortReference) {
  // A 32,000-token vocabulary, sharp and flat distributions, every filter alone and together.
  // The kept set and its probabilities must match; the order must too, except without any
  // filter (then the order is free and compared as a set).
  struct Case { int top_k; float top_p, min_p, temp; };
  const Case cases[] = {{0, 1, 0, 1}, {40, 1, 0, 0.7f}, {0, 0.9f, 0, 1}, {0, 0.999f, 0, 2},
                        {0, 1, 0.05f, 1}, {0, 1, 0.001f, 3}, {40, 0.95f, 0.05f, 0.8f}, {5000, 0.99f, 0, 1.5f}};
  for (uint32_t seed = 0; seed < 6; ++seed) {
    auto base = random_logits(32000, 100 + seed);
    if (seed % 2) for (float& x : base) x *= 0.2f;  // flat: top-p keeps thousands
    for (const Case& c : cases) {
      SamplingParams p = plain(c.temp);
      p.top_k = c.top_k, p.top_p = c.top_p, p.min_p = c.min_p;
      auto l = base;
      auto got = Sampler(p).candidates(l, {});
      auto want = reference_candidates(base, p);
      ASSERT_EQ(got.size(), want.size()) << "seed " << seed << " top_k " << c.top_k << " top_p " << c.top_p;
      bool ordered = c.top_k > 0 || c.top_p < 1 || c.min_p > 0;
      if (!ordered) std::sort(got.begin(), got.end(), [&](auto a, auto b) { return base[a.id] != base[b.id] ? base[a.id] > base[b.id] : a.id < b.id; });
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].id, want[i].id) << "rank " << i;
        ASSERT_NEAR(got[i].p, want[i].p, 1e-6 * want[i].p + 1e-12);  // sums in another order
      }
    }
  }
}

// Logits a broken model might give (NaN, infinities) under every filter: a token id of the
// vocabulary, never a crash or a read outside the buffers (ASan runs this in `make sanitize`).
TEST(Sampler, NonFiniteLogitsStillGiveATokenId) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Case { int top_k; float top_p, min_p; };
  for (const Case& c : {Case{0, 1, 0}, Case{0, 0.9f, 0}, Case{0, 1, 0.05f}, Case{40, 0.9f, 0.05f}}) {
    for (int pattern = 0; pattern < 4; ++pattern) {
      auto l = random_logits(5000, 7);
      for (size_t i = 0; i < l.size(); i += 97) l[i] = pattern == 0 ? nan : pattern == 1 ? inf : pattern == 2 ? -inf : (i % 2 ? nan : inf);
      SamplingParams p = plain(1.0f);
      p.top_k = c.top_k, p.top_p = c.top_p, p.min_p = c.min_p;
      Sampler s(p);
      const int32_t t = s.sample(l, {});
      EXPECT_GE(t, 0);
      EXPECT_LT(t, 5000);
    }
  }
}

TEST(Sampler, RepetitionPenaltyDividesPositiveMultipliesNegative) {
  std::vector<float> l = {2.0f, -2.0f, 1.0f};
  SamplingParams p = plain(0);
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  std::vector<int32_t> hist = {0, 1, 0};
  auto c = s.candidates(l, hist);  // penalties applied in place
  EXPECT_FLOAT_EQ(l[0], 1.0f);
  EXPECT_FLOAT_EQ(l[1], -4.0f);
  EXPECT_FLOAT_EQ(l[2], 1.0f);
  EXPECT_EQ(c[0].id, 0);  // tie 1.0 vs 1.0: the lower id wins
}

TEST(Sampler, FrequencyAndPresencePenalties) {
  std::vector<float> l = {3.0f, 3.0f, 3.0f};
  SamplingParams p = plain(0);
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p);
  std::vector<int32_t> hist = {0, 0, 1};
  EXPECT_EQ(s.sample(l, hist), 2);
  EXPECT_FLOAT_EQ(l[0], 3.0f - 2 * 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(l[1], 3.0f - 0.5f - 0.25f);
}

// The penalties against counts in a map, on fresh random histories (ids outside the
// vocabulary among them) one call after another on the same thread: nothing is left over
// from the call before.
TEST(Sampler, FrequencyAndPresencePenaltiesMatchCountsOnRandomHistories) {
  std::mt19937 rng(std::random_device{}());
  SamplingParams p = plain(0);
  p.frequency_penalty = 0.3f;
  p.presence_penalty = -0.7f;
  Sampler s(p);
  for (int call = 0; call < 4; ++call) {
    const size_t n = 500 + rng() % 1000;
    auto l = random_logits(n, rng());
    std::vector<int32_t> hist(rng() % 3000);
    for (int32_t& t : hist) t = static_cast<int32_t>(rng() % (n + 40)) - 20;  // some < 0, some >= n
    std::map<int32_t, int> count;
    for (int32_t t : hist) ++count[t];
    auto want = l;
    for (auto [t, c] : count)
      if (t >= 0 && size_t(t) < n) want[size_t(t)] -= c * p.frequency_penalty + p.presence_penalty;
    s.sample(l, hist);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(l[i], want[i]) << "call " << call << " token " << i;
  }
}

TEST(Sampler, LogitBiasIsAddedBeforeThePenalties) {
  std::vector<float> logits = random_logits(512, 11);
  const int32_t top = argmax(logits);
  SamplingParams p = plain(0);
  p.logit_bias = {{top, -100.0f}, {7, 2.5f}, {900, 50.0f}};  // 900: beyond this vocabulary, no logit
  p.presence_penalty = 1.0f;
  std::vector<float> want = logits;
  want[top] -= 100.0f;
  want[7] = (want[7] + 2.5f) - 1.0f;  // bias, then the presence penalty (7 is in the history)
  std::vector<float> l = logits;
  std::vector<int32_t> hist = {7};
  EXPECT_EQ(Sampler(p).sample(l, hist), argmax(want));
  EXPECT_NE(argmax(want), top);
  for (size_t i = 0; i < l.size(); ++i) EXPECT_EQ(l[i], want[i]) << i;

  // With sampling, the candidates are the softmax of the biased logits.
  SamplingParams q = plain(1);
  q.logit_bias = {{3, 4.0f}};
  std::vector<float> lq = logits, lb = logits;
  lb[3] += 4.0f;
  const auto c = Sampler(q).candidates(lq, {});
  const auto ref = Sampler(plain(1)).candidates(lb, {});
  ASSERT_EQ(c.size(), ref.size());
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(c[i].id, ref[i].id);
    EXPECT_FLOAT_EQ(c[i].p, ref[i].p);
  }
}

TEST(Sampler, RejectsInvalidParameters) {
  auto bad = [](auto edit) {
    SamplingParams p;
    edit(p);
    EXPECT_THROW(Sampler{p}, Error);
  };
  bad([](SamplingParams& p) { p.temperature = -0.1f; });
  bad([](SamplingParams& p) { p.temperature = NAN; });
  bad([](SamplingParams& p) { p.top_p = 0; });
  bad([](SamplingParams& p) { p.top_p = 1.5f; });
  bad([](SamplingParams& p) { p.min_p = -1; });
  bad([](SamplingParams& p) { p.top_k = -3; });
  bad([](SamplingParams& p) { p.repeat_penalty = 0; });
  bad([](SamplingParams& p) { p.frequency_penalty = 3; });
  bad([](SamplingParams& p) { p.logit_bias = {{5, 101.0f}}; });
  bad([](SamplingParams& p) { p.logit_bias = {{5, NAN}}; });
  bad([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; });
  SamplingParams p;
  p.logit_bias = {{5, 1.0f}};
  EXPECT_NO_THROW(p.validate(6));
  EXPECT_THROW(p.validate(5), Error);  // a model of 5 tokens has no token 5
}

}  // namespace
}  // namespace brisk
