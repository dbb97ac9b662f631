// A draft model drafting for many sequences at once (the serving engine's speculative
// sequences, or one generation): the j-th guess of every sequence comes out of one ragged
// forward pass of the draft model, so k guesses for n sequences cost k passes, not n * k
// (each pass reads the draft's weights once for all the sequences). Every sequence drafts
// in a cache slot of its own; a slot keeps the longest prefix its cached tokens share with
// the tokens it is asked to continue, so rejected guesses (and a slot that passed to
// another sequence) are rolled back by truncation, and each call feeds only what is new.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/draft_source.h"
#include "engine/loaded_model.h"

namespace brisk {

// The draft's sampler settings: the target's, on a random stream of its own (reproducible).
SamplingParams draft_sampling(const SamplingParams& target);

struct DraftRequest {
  int slot = 0;                      // the drafter's cache slot for this sequence
  std::span<const int32_t> tokens;   // prompt and output so far, the last not yet verified
  int k = 0;                         // guesses wanted
  Sampler* sampler = nullptr;        // draws them (draft_sampling() of the request's settings)
  std::vector<DraftToken>* out = nullptr;  // receives the guesses (cleared first)
};

class BatchedDraftModel {
 public:
  // `n_slots` sequences at most, each up to n_ctx positions (capped at the draft's own).
  BatchedDraftModel(std::shared_ptr<const LoadedModel> draft, int n_slots, int64_t n_ctx);

  int64_t capacity() const { return cache_.capacity(); }  // positions per slot
  int n_slots() const { return static_cast<int>(cache_.n_seq()); }
  const LoadedModel& model() const { return *draft_; }
  int64_t passes() const { return passes_; }  // draft forward passes run so far

  // The draft reads at most the last kWindow tokens of a sequence it has not followed (a
  // new prompt, say), at positions from 0: its guesses only have to be likely, a long
  // prompt's catch-up then costs what a short one's does, and each draft pass attends to
  // a short context. brisk-small with a q4_0 brisk-tiny on the 1.5k-token long_qa prompt:
  // acceptance 0.78 -> 0.75, tokens/s 1.18x (a 128-token window accepted 0.72 and ran
  // slower; 512 accepted as the whole prompt did and was no faster than 256; docs/benchmarks.md,
  // "Session 15").
  static constexpr int64_t kWindow = 256;

  // Tokens of `tokens` the slot would have to feed before drafting (its cache keeps the
  // longest common prefix): a new sequence's prompt (its last kWindow tokens), for one.
  int64_t lag(int slot, std::span<const int32_t> tokens) const;
  // Seconds a token of a long catch-up has cost (a moving average over catch-ups of 64
  // tokens or more), 0 before the first.
  double catch_up_seconds_per_token() const { return catch_up_s_per_token_; }

  // Drafts every request's guesses. A sequence that would not fit its slot (tokens + k >
  // capacity) drafts from its last capacity - k tokens (or kWindow, the fewer). `serial`:
  // every pass on the calling thread, never touching the global thread pool (a drafter
  // running beside the target's forward on another thread).
  void propose(std::span<const DraftRequest> requests, bool serial = false);

 private:
  void forward(bool serial);
  // Row j of the last pass's logits over the whole vocabulary (the draft model may compute
  // a subset: Model::set_output_rows).
  void logits_row(size_t j, std::vector<float>& row) const;
  // Where the slot's position 0 lies in `tokens` (base) and how many cached tokens it keeps,
  // for a call that drafts k guesses.
  struct Window {
    size_t base, keep;
  };
  Window window(int slot, std::span<const int32_t> tokens, int k) const;

  std::shared_ptr<const LoadedModel> draft_;
  KvCache cache_;
  std::vector<std::vector<int32_t>> cached_;  // per slot: tokens whose K/V are in the cache
  std::vector<size_t> base_;                  // per slot: the index in its sequence of cached_[0]
  Batch batch_;
  std::vector<float> logits_;
  int64_t passes_ = 0;
  double catch_up_s_per_token_ = 0;
};

}  // namespace brisk
