// token_logprobs against a plain reference: log-softmax in double over the whole row and a
// full sort for the top N (largest first, ties by lower id, NaN never among them), on fresh
// random rows with ties.
#include "engine/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace brisk {
namespace {

TEST(Logprobs, MatchLogSoftmaxInDoubleAndAFullSort) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> nd(0, 4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t n : {1, 3, 20, 1000, 16384}) {
    for (int rep = 0; rep < 10; ++rep) {
      std::vector<float> l(n);
      for (float& v : l) v = std::round(nd(rng) * 8) / 8;  // coarse: ties happen
      if (rep % 2 && n > 3) for (size_t i = 1; i < n; i += 13) l[i] = nan;
      const int top_n = static_cast<int>(rng() % 25);
      double mx = -INFINITY;
      for (float v : l) if (v == v) mx = std::max<double>(mx, v);
      double s = 0;
      for (float v : l) if (v == v) s += std::exp(double(v) - mx);
      const double lse = mx + std::log(s);
      std::vector<int32_t> ids;
      for (size_t i = 0; i < n; ++i) if (l[i] == l[i]) ids.push_back(static_cast<int32_t>(i));
      std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return l[a] != l[b] ? l[a] > l[b] : a < b; });
      ids.resize(std::min<size_t>(ids.size(), static_cast<size_t>(top_n)));
      const int32_t chosen = static_cast<int32_t>(rng() % n);
      std::vector<TokenLogprob> top;
      const float lp = token_logprobs(l, chosen, top_n, top);
      if (rep % 2 && n > 3) {  // NaN in the row: its sum is NaN, but the top N stays clean
        ASSERT_EQ(top.size(), ids.size());
        for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(top[i].id, ids[i]);
        continue;
      }
      EXPECT_NEAR(lp, l[static_cast<size_t>(chosen)] - lse, 2e-5 * (1 + std::fabs(lse)));
      ASSERT_EQ(top.size(), ids.size()) << "n " << n << " top " << top_n;
      for (size_t i = 0; i < ids.size(); ++i) {
        ASSERT_EQ(top[i].id, ids[i]) << "rank " << i;
        ASSERT_NEAR(top[i].logprob, l[static_cast<size_t>(ids[i])] - lse, 2e-5 * (1 + std::fabs(lse)));
      }
    }
  }
}

}  // namespace
}  // namespace brisk
