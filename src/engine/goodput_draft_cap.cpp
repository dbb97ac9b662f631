#include "engine/goodput_draft_cap.h"

#include <algorithm>

namespace brisk {

int GoodputDraftCap::bucket(int n_spec) {
  int b = 0;
  while (b + 1 < kBuckets && (1 << b) < n_spec) ++b;
  return b;
}

int GoodputDraftCap::best_tried(int b) const {
  const auto& arms = arms_[static_cast<size_t>(b)];
  int best = -1;
  for (size_t a = 0; a < arms.size(); ++a)
    if (arms[a].n >= kTries && (best < 0 || arms[a].mean > arms[static_cast<size_t>(best)].mean))
      best = static_cast<int>(a);
  return best;
}

double GoodputDraftCap::saved_per_token(int n_spec) const {
  const int b = bucket(n_spec), best = best_tried(b);
  const auto& arms = arms_[static_cast<size_t>(b)];
  if (best < 0 || arms[0].n < kTries || !(arms[0].mean > 0)) return -1;
  return std::max(0.0, 1 / arms[0].mean - 1 / arms[static_cast<size_t>(best)].mean);
}

int GoodputDraftCap::choose(int n_spec) {
  const int b = bucket(n_spec);
  const auto& arms = arms_[static_cast<size_t>(b)];
  last_retry_ = false;
  // First each cap kTries times, from the largest down while goodput rises: it is unimodal
  // in the cap. More sequences make each guess cost more (the whole batch's verification
  // grows) and pay no more, so the best cap does not grow with the bucket: a bucket starts
  // from the best cap of the nearest smaller one tried, not from 8 (at 16 sequences a try of
  // cap 8 costs several plain steps, the draft model first catching up on every sequence).
  int top = static_cast<int>(arms.size()) - 1;
  for (int lb = b - 1; lb >= 0; --lb)
    if (const int best = best_tried(lb); best >= 0) {
      top = best;
      break;
    }
  // Plain decoding (cap 0) is tried too, past the peak: its tries are the cheapest steps,
  // and what a guess saves is measured against it (saved_per_token).
  int pick = -1;
  for (int a = top; a >= 0 && pick < 0; --a) {
    if (a + 2 <= top && arms[static_cast<size_t>(a + 1)].mean < arms[static_cast<size_t>(a + 2)].mean) {
      if (arms[0].n < kTries) pick = 0;
      break;
    }
    if (arms[static_cast<size_t>(a)].n < kTries) pick = a;
  }
  if (pick < 0) {
    pick = static_cast<int>(std::max_element(arms.begin(), arms.end(), [](const Arm& x, const Arm& y) {
                              return x.mean < y.mean;
                            }) - arms.begin());
    // Re-try a neighbouring cap, not any: a far one (cap 8 where plain decoding is best)
    // can cost ~8 steps' time, and re-trying any cap 1 step in 32 cost ~10-20% of the
    // throughput. Re-tries that lose come less and less often (every 64 steps, doubling
    // to 1024); one that wins brings them back to every 64.
    int& every = retry_every_[static_cast<size_t>(b)];
    if (rng_() % static_cast<uint64_t>(every) == 0) {
      const int n = static_cast<int>(arms.size());
      best_mean_ = arms[static_cast<size_t>(pick)].mean;
      pick = pick == 0 ? 1 : pick == n - 1 ? n - 2 : pick + (rng_() % 2 ? 1 : -1);
      last_retry_ = true;
    }
  }
  last_bucket_ = b, last_arm_ = pick;
  return kCaps[static_cast<size_t>(pick)];
}

void GoodputDraftCap::observe(int64_t tokens, double seconds) {
  if (last_arm_ < 0 || !(seconds > 0)) return;
  Arm& a = arms_[static_cast<size_t>(last_bucket_)][static_cast<size_t>(last_arm_)];
  const double g = static_cast<double>(tokens) / seconds;
  if (last_retry_) {
    int& every = retry_every_[static_cast<size_t>(last_bucket_)];
    every = g > best_mean_ ? 64 : std::min(2 * every, 1024);
  }
  // The first tries averaged, then a moving average that follows a changing load.
  a.mean = a.n < kTries ? (a.mean * a.n + g) / (a.n + 1) : a.mean + (g - a.mean) / 16;
  ++a.n;
  last_arm_ = -1;
}

}  // namespace brisk
