// How many guesses a serving step may verify per sequence, chosen by measured goodput.
//
// A verification pass of n sequences x (1 + k) tokens costs more than n decode tokens, and
// how much more depends on the batch (on this CPU: up to 8 tokens share the fused GEMV,
// beyond that the tiled path costs ~2x per token), while the guesses pay only with their
// acceptance rate. So the best k falls as the batch grows: the draft model's k = 4 gave
// 1.96x at one request and 0.54x at four (docs/benchmarks.md). Following SmartSpec (Liu et
// al., "Optimizing Speculative Decoding for Serving Large Language Models Using Goodput",
// arXiv 2406.14066: pick the draft length per step that maximizes generated tokens per
// second of the step), the engine picks a cap on every sequence's k from a few candidates
// by the goodput it measured for each at the current number of speculative sequences
// (buckets of powers of two) instead of from a profiled cost model: it tries each cap a
// few times, from the largest down while goodput rises (with more sequences, from the best
// cap found with fewer), then takes the best, re-trying a neighbouring cap now and then (1
// step in 64, backing off to 1 in 1024 while re-tries lose) so a change of load or
// acceptance is noticed (a hill climb: goodput is unimodal in the cap). A cap of 0 is plain
// decoding.
// Only steps without prompt chunks are measured (a prefill's time is not the guesses').
// The cap changes how fast, never what is generated (verification is exact); a sampled
// request's draws, though, then depend on the timing, as they already did on preemptions.
#pragma once
#include <array>
#include <cstdint>
#include <random>

namespace brisk {

class GoodputDraftCap {
 public:
  static constexpr std::array<int, 5> kCaps = {0, 1, 2, 4, 8};
  static constexpr int kTries = 3;  // measured steps per cap before choosing by goodput

  explicit GoodputDraftCap(uint64_t seed = 1) : rng_(seed) {}

  // The cap for a step with n_spec >= 1 speculative sequences about to decode.
  int choose(int n_spec);
  // The step that used the last choice produced `tokens` in `seconds` (call only for
  // steps that are to be measured).
  void observe(int64_t tokens, double seconds);

  // Seconds of step time a generated token saves at the best cap against plain decoding
  // (cap 0) at n_spec's bucket: 0 where plain decoding is best, -1 before both were tried.
  double saved_per_token(int n_spec) const;

  // Measured goodput (tokens/s, 0 if never tried) of cap index a at bucket b (tests).
  double goodput(int bucket, int a) const { return arms_[static_cast<size_t>(bucket)][static_cast<size_t>(a)].mean; }
  static int bucket(int n_spec);

 private:
  struct Arm {
    double mean = 0;
    int n = 0;
  };
  static constexpr int kBuckets = 8;  // 1, 2, 3-4, 5-8, ..., 65+
  int best_tried(int bucket) const;  // the best cap index tried kTries times there, or -1
  std::array<std::array<Arm, kCaps.size()>, kBuckets> arms_{};
  std::array<int, kBuckets> retry_every_ = [] {
    std::array<int, kBuckets> a{};
    a.fill(64);
    return a;
  }();
  std::mt19937_64 rng_;
  int last_bucket_ = -1, last_arm_ = -1;
  bool last_retry_ = false;  // the last choice re-tried a neighbour of the best cap,
  double best_mean_ = 0;     // whose goodput was this
};

}  // namespace brisk
