// The serving engine: many requests at once over one model. An engine thread owns the
// model, the paged KV cache and the scheduler; other threads (HTTP handlers) submit
// requests and receive their tokens through callbacks. Each engine step runs one ragged
// batch: decode tokens of the running sequences first, then prefill chunks of waiting or
// partly-prefilled ones, within a token budget and the free KV blocks (continuous
// batching, chunked prefill: Orca, OSDI '22; vLLM/PagedAttention, SOSP '23).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <optional>

#include "engine/draft_source.h"
#include "engine/loaded_model.h"
#include "engine/sampler.h"

namespace brisk {

struct EngineConfig {
  int64_t n_ctx = 0;         // most tokens (prompt + output) of one sequence; 0: model's, <= 4096
  int64_t block_size = 16;   // positions per KV block
  int64_t kv_blocks = 0;     // blocks in the pool; 0: max_running * n_ctx / block_size
  int max_running = 8;       // sequences decoding at once (--parallel)
  int max_queue = 256;       // waiting requests before submit() refuses
  int64_t token_budget = 512;  // tokens per engine step (decode tokens + prefill chunk);
                               // raised to max_running if smaller
  std::string prefix_cache = "lru";  // "off" | "lru" | "gdsf" (kv/eviction_policy.h)
  // Speculative decoding for requests that do not choose (engine/speculative_decoder.h):
  // the guesses ride in the same ragged batch as the sequence's decode token and are
  // verified exactly. speculative.draft_model, when set, is loaded once and shared by the
  // requests that ask for "draft" (engine/batched_draft_model.h: the j-th guesses of all
  // of them in one draft pass, each sequence in a draft cache slot of its own) or "smc".
  // smc (approximate, sampled
  // requests only) cannot be the default: a request asks for it, and SMC-SD requests run
  // one at a time, one SMC step per engine step beside the batches, on their own caches;
  // their tokens arrive together at the end (the winning particle is known only then).
  SpecOptions speculative;
  // MineDraft-style overlap (arXiv 2603.18016) for the "draft" requests: they are split in
  // two groups, and while the target verifies one group's guesses (the step's forward on
  // the global thread pool), another thread drafts the other group's next guesses on its
  // own (never touching the pool); the groups swap every step. Give the target one
  // thread fewer (-t) than the cores, the drafter takes one.
  bool spec_overlap = false;
};

struct CompletionRequest {
  std::vector<int32_t> prompt;  // already tokenized (chat template applied by the caller)
  int max_tokens = 16;
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings: the text ends before the first match
  bool ignore_eos = false;
  int top_logprobs = -1;  // -1: no logprobs; 0..20: chosen token's logprob + N alternatives
  std::optional<SpecOptions> speculative;  // none: EngineConfig::speculative
};

struct TokenLogprob {
  int32_t id;
  float logprob;
};

// What a request's callback receives: zero or more new tokens and their text, and at the
// end one event with done = true.
struct StreamEvent {
  std::string text;  // new text: complete UTF-8 characters, stop strings cut off
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;                          // per token, when asked
  std::vector<std::vector<TokenLogprob>> top_logprobs;  // per token, when asked
  bool done = false;
  std::string finish_reason;  // when done: "stop" | "length" | "cancelled" | "error"
  std::string error;          // when finish_reason == "error"
  int prompt_tokens = 0, completion_tokens = 0, cached_prompt_tokens = 0;  // when done
};

// Thrown by submit() when the queue is full (HTTP 429) or the engine is stopping (503).
class EngineBusy : public std::runtime_error {
 public:
  EngineBusy(const std::string& what, bool stopping)
      : std::runtime_error(what), stopping(stopping) {}
  bool stopping;
};

struct EngineMetrics {
  uint64_t requests_total = 0, requests_finished = 0, requests_cancelled = 0,
           requests_rejected = 0;
  uint64_t prompt_tokens_total = 0, generated_tokens_total = 0;
  uint64_t prefix_cache_queries = 0, prefix_cache_hits = 0;  // in prompt tokens
  uint64_t preemptions_total = 0;
  uint64_t spec_drafted_total = 0, spec_accepted_total = 0;  // speculative guesses verified / accepted
  uint64_t spec_drafted_beside_total = 0;  // guesses drafted beside a target pass (spec_overlap)
  int64_t queue_depth = 0, running = 0;
  int64_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_cached = 0;  // cached: free but reusable
  // Latency histograms: cumulative counts per upper bound (seconds), Prometheus style;
  // the +Inf bucket is ttft_count / itl_count. TTFT runs from submit() to the first token;
  // inter-token latency between consecutive tokens of a request.
  std::vector<double> latency_buckets;  // upper bounds, shared by both histograms
  std::vector<uint64_t> ttft_counts, itl_counts;
  double ttft_sum = 0, itl_sum = 0;
  uint64_t ttft_count = 0, itl_count = 0;
};

class Engine {
 public:
  // Starts the engine thread. `model` must outlive the engine.
  Engine(LoadedModel& model, const EngineConfig& config);
  ~Engine();  // cancels what is left and joins the thread
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; callable from any thread. Throws brisk::Error for an invalid request
  // (empty prompt, prompt + 1 > n_ctx, bad sampling parameters, ...) and EngineBusy when
  // the queue is full. on_event runs on the engine thread and must not block; it may run
  // (even to the last event) before submit() returns.
  uint64_t submit(CompletionRequest request, std::function<void(const StreamEvent&)> on_event);

  // Stops a request (its client went away); its last event has finish_reason
  // "cancelled" and its KV blocks are released at the next step.
  void cancel(uint64_t id);

  EngineMetrics metrics() const;
  const EngineConfig& config() const;
  const Tokenizer& tokenizer() const;
  const ModelConfig& model_config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brisk
