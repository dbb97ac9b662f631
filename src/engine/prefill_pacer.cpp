#include "engine/prefill_pacer.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace brisk {

PrefillPacer::PrefillPacer(int64_t max_tokens, int64_t min_tokens, double ratio)
    : max_(max_tokens), min_(std::min(min_tokens, max_tokens)), ratio_(ratio) {
  if (max_tokens < 1 || min_tokens < 1) fail("prefill pacer: token limits must be >= 1");
  if (!(ratio > 1)) fail("prefill pacer: the step time ratio must be > 1, got {}", ratio);
  cap_ = min_;  // grown from the least, so the first mixed steps do not overshoot
}

void PrefillPacer::observe(double seconds, int64_t n_decode, int64_t n_prefill) {
  if (n_decode == 0 || !(seconds > 0)) return;  // nobody waits on this step's latency
  if (n_prefill == 0) {
    decode_ema_ = decode_ema_ == 0 ? seconds : 0.8 * decode_ema_ + 0.2 * seconds;
    since_decode_only_ = 0;
    return;
  }
  ++since_decode_only_;
  if (decode_ema_ == 0) return;  // no yardstick yet
  const double allowed = (ratio_ - 1) * decode_ema_, extra = seconds - decode_ema_;
  double next;
  if (extra > allowed) {
    // The prefill's time scales with its tokens: scale the cap to fit (at most halving
    // per step, so one slow step from outside noise does not wipe it out).
    next = static_cast<double>(n_prefill) * std::max(0.5, allowed / extra);
  } else {
    // Under the limit: grow by a sixteenth of the cap (at least a token) toward it; a
    // small step, so that growing overshoots the limit by little.
    next = static_cast<double>(cap_) + std::max<double>(1.0, static_cast<double>(cap_) / 16);
  }
  cap_ = std::clamp<int64_t>(static_cast<int64_t>(std::floor(next)), min_, max_);
}

}  // namespace brisk
