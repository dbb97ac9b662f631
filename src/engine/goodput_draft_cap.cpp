#include "engine/goodput_draft_cap.h"

#include <algorithm>

namespace brisk {

int GoodputDraftCap::bucket(int n_spec) {
  int b = 0;
  while (b + 1 < kBuckets && (1 << b) < n_spec) ++b;
  return b;
}

int GoodputDraftCap::choose(int n_spec) {
  const int b = bucket(n_spec);
  const auto& arms = arms_[static_cast<size_t>(b)];
  int pick = -1;
  for (int a = static_cast<int>(arms.size()) - 1; a >= 0 && pick < 0; --a)  // each cap kTries times first,
    if (arms[static_cast<size_t>(a)].n < kTries) pick = a;                    // the largest first
  if (pick < 0) {
    pick = static_cast<int>(std::max_element(arms.begin(), arms.end(), [](const Arm& x, const Arm& y) {
                              return x.mean < y.mean;
                            }) - arms.begin());
    if (rng_() % 32 == 0) pick = static_cast<int>((pick + 1 + rng_() % (arms.size() - 1)) % arms.size());
  }
  last_bucket_ = b, last_arm_ = pick;
  return kCaps[static_cast<size_t>(pick)];
}

void GoodputDraftCap::observe(int64_t tokens, double seconds) {
  if (last_arm_ < 0 || !(seconds > 0)) return;
  Arm& a = arms_[static_cast<size_t>(last_bucket_)][static_cast<size_t>(last_arm_)];
  const double g = static_cast<double>(tokens) / seconds;
  // The first tries averaged, then a moving average that follows a changing load.
  a.mean = a.n < kTries ? (a.mean * a.n + g) / (a.n + 1) : a.mean + (g - a.mean) / 16;
  ++a.n;
  last_arm_ = -1;
}

}  // namespace brisk
