// How many prompt tokens a step may prefill while other sequences are decoding, so that
// their inter-token latency stays even when long prompts arrive.
//
// Chunked prefill (Sarathi-Serve, OSDI '24) bounds a step's prefill by a token budget
// chosen offline from a latency target. Here the bound adapts online: a step that mixes
// decodes with prefill may take at most `ratio` times a decode-only step (an exponential
// average of measured ones); after each mixed step the cap is scaled by how far its extra
// time (beyond a decode-only step) was from the allowed extra time, and grows slowly while
// steps stay under the limit. The yardstick comes from decode-only steps, which the pacer
// asks for now and then while prompts keep arriving. It needs no per-machine tuning, and
// the decodes' p99 inter-token latency stays within ~ratio x their median.
#pragma once
#include <cstdint>

namespace brisk {

class PrefillPacer {
 public:
  // max_tokens: the step's token budget (the cap never exceeds it); min_tokens: the least
  // prefill a mixed step still gets, so prompts always progress.
  PrefillPacer(int64_t max_tokens, int64_t min_tokens, double ratio = 1.5);

  // Prefill tokens allowed in the next step if it has decodes: the limit, or 0 when a
  // decode-only step is due to measure (or refresh) the yardstick: the first step with
  // decodes, then one in kMeasureEvery while prompts keep arriving.
  int64_t cap() const { return decode_ema_ == 0 || since_decode_only_ >= kMeasureEvery ? 0 : cap_; }
  int64_t limit() const { return cap_; }

  // A step took `seconds` for n_decode decode tokens and n_prefill prompt tokens.
  void observe(double seconds, int64_t n_decode, int64_t n_prefill);

  double decode_step_seconds() const { return decode_ema_; }

 private:
  static constexpr int kMeasureEvery = 16;
  int64_t max_, min_, cap_;
  int since_decode_only_ = 0;  // steps with decodes and prefill since the last without
  double ratio_, decode_ema_ = 0;
};

}  // namespace brisk
