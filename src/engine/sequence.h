// One request as the engine runs it: its tokens (prompt, then what it generated), how far
// its K/V is computed, its KV blocks, and its per-request generation state (sampler, text
// decoder, stop strings, timing). Owned by the engine thread; the scheduler moves it
// between waiting and running.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "engine/draft_source.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "engine/speculative_decoder.h"
#include "engine/stop_matcher.h"
#include "tokenizer/tokenizer.h"

namespace brisk {

struct Sequence {
  using Clock = std::chrono::steady_clock;

  uint64_t id = 0;
  CompletionRequest request;
  std::function<void(const StreamEvent&)> on_event;

  std::vector<int32_t> tokens;  // prompt + generated; the last one may lack K/V yet
  int64_t n_prompt = 0;
  int64_t n_computed = 0;       // positions 0..n_computed-1 have K/V in `blocks`

  // KV: the block table (pool block ids), the slot of the KvCache while running, the
  // chained hashes of full blocks of `tokens` (filled lazily) and how many leading blocks
  // were offered to the prefix cache.
  std::vector<int32_t> blocks;
  int slot = -1;
  std::vector<uint64_t> hashes;
  int64_t n_published = 0;

  uint64_t admit_order = 0;     // larger: admitted later (the preemption victim)
  bool admitted_before = false;
  int64_t cached_prompt_tokens = 0;  // prompt tokens found in the prefix cache (first admission)
  int preemptions = 0;

  // Generation state (engine only).
  std::optional<Sampler> sampler;
  std::optional<StreamDecoder> decoder;
  std::optional<StopMatcher> stop;
  Clock::time_point arrival{}, last_token{};
  bool done = false;

  // Speculative decoding: the drafter (none: one token per step) — a retrieval drafter of
  // its own, or the engine's shared draft model (engine/batched_draft_model.h) drawing with
  // draft_sampler —, the guesses for the positions after the last token that the next
  // step verifies, and the draft length. `drafting`: the draft model is drafting its
  // guesses beside this step's target pass (MineDraft overlap): the scheduler skips it.
  std::unique_ptr<DraftSource> draft;
  std::optional<Sampler> draft_sampler;
  std::vector<DraftToken> drafts;
  std::optional<AdaptiveDraftLength> draft_len;
  bool drafting = false;
  // SMC-SD (engine/smc_decoder.h): such a sequence is not scheduled; the engine runs it one
  // step per loop beside the batches, on its own caches, and streams its tokens at the end.
  std::optional<SpecOptions> smc;

  int64_t n_generated() const { return static_cast<int64_t>(tokens.size()) - n_prompt; }
  int64_t n_pending() const { return static_cast<int64_t>(tokens.size()) - n_computed; }
  bool running() const { return slot >= 0; }
  bool speculative() const { return draft || draft_sampler; }
};

}  // namespace brisk
