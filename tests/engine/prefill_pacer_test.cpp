#include "engine/prefill_pacer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "util/error.h"

namespace brisk {
namespace {

// A simulated machine: a step costs fixed + per decode token + per prefill token, with
// +-10% noise.
struct Machine {
  double fixed, per_decode, per_prefill;
  std::mt19937 rng{7};
  double step(int64_t n_decode, int64_t n_prefill) {
    std::uniform_real_distribution<double> noise(0.9, 1.1);
    return (fixed + per_decode * n_decode + per_prefill * n_prefill) * noise(rng);
  }
};

// Steady state: 8 decodes per step, a long prompt always waiting. Mixed steps settle near
// the allowed ratio (1.5x a decode-only step), not far below it (prefill must progress).
TEST(PrefillPacer, MixedStepsSettleNearTheAllowedRatio) {
  for (double per_prefill : {1e-7, 5e-6, 5e-5, 5e-4}) {
    Machine m{1e-3, 1e-4, per_prefill};
    PrefillPacer pacer(512, 16);
    for (int i = 0; i < 20; ++i) pacer.observe(m.step(8, 0), 8, 0);
    const double decode_only = 1e-3 + 8e-4;
    EXPECT_NEAR(pacer.decode_step_seconds(), decode_only, 0.1 * decode_only);
    double worst = 0, sum = 0;
    int n = 0;
    for (int i = 0; i < 400; ++i) {
      const int64_t cap = pacer.cap();
      ASSERT_TRUE(cap == 0 || (cap >= 16 && cap <= 512)) << cap;
      const double t = m.step(8, cap);
      pacer.observe(t, 8, cap);
      if (i >= 100) {  // after settling
        worst = std::max(worst, t / decode_only);
        sum += t / decode_only;
        ++n;
      }
    }
    // Where even the minimum chunk costs more than allowed, the minimum is kept.
    const double at_min = (1e-3 + 8e-4 + 16 * per_prefill) / decode_only;
    if (at_min > 1.5) {
      EXPECT_EQ(pacer.limit(), 16);
      continue;
    }
    // Where even the whole budget fits, the cap reaches it.
    if ((1e-3 + 8e-4 + 512 * per_prefill) / decode_only < 1.4) {
      EXPECT_EQ(pacer.limit(), 512);
      continue;
    }
    EXPECT_LT(worst, 2.0) << "per_prefill " << per_prefill;
    EXPECT_GT(sum / n, 1.25) << "per_prefill " << per_prefill;
  }
}

TEST(PrefillPacer, StepsWithoutDecodesDoNotMoveIt) {
  PrefillPacer pacer(512, 16);
  const int64_t before = pacer.limit();
  pacer.observe(1.0, 0, 512);  // a long prefill nobody waits on
  EXPECT_EQ(pacer.limit(), before);
  EXPECT_EQ(pacer.decode_step_seconds(), 0);
  pacer.observe(1.0, 4, 64);  // mixed, but no yardstick yet
  EXPECT_EQ(pacer.limit(), before);
}

// Without a yardstick the next step with decodes is decode-only (cap 0); while prompts
// keep arriving, one step in 16 is.
TEST(PrefillPacer, AsksForDecodeOnlyStepsToMeasure) {
  PrefillPacer pacer(512, 16);
  EXPECT_EQ(pacer.cap(), 0);
  pacer.observe(1e-3, 8, 0);
  EXPECT_GT(pacer.cap(), 0);
  int zeros = 0;
  for (int i = 0; i < 160; ++i) {
    const int64_t cap = pacer.cap();
    zeros += cap == 0;
    pacer.observe(cap == 0 ? 1e-3 : 1.2e-3, 8, cap);
  }
  EXPECT_GE(zeros, 9);
  EXPECT_LE(zeros, 10);
}

TEST(PrefillPacer, RejectsBadLimits) {
  EXPECT_THROW(PrefillPacer(0, 16), Error);
  EXPECT_THROW(PrefillPacer(512, 0), Error);
  EXPECT_THROW(PrefillPacer(512, 16, 1.0), Error);
  EXPECT_EQ(PrefillPacer(8, 16).limit(), 8);  // the minimum never exceeds the budget
}

}  // namespace
}  // namespace brisk
