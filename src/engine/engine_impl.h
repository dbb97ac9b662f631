// The engine's state and its steps (engine/engine.h's Engine::Impl), shared by engine.cpp
// (the loop, the target's batches, streaming) and engine_speculation.cpp (drafting,
// verification, SMC-SD). Private to the engine module.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/batched_draft_model.h"
#include "engine/engine.h"
#include "engine/goodput_draft_cap.h"
#include "engine/latency_histogram.h"
#include "engine/logprobs.h"
#include "engine/prefill_pacer.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/smc_decoder.h"

namespace brisk {

struct Engine::Impl {
  LoadedModel& lm;
  EngineConfig cfg;
  KvCache kv;
  BlockPool pool;
  Scheduler sched;
  PrefillPacer pacer;

  // Shared with other threads (guarded by mu).
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Sequence>> incoming;
  std::vector<uint64_t> cancels;
  bool stopping = false;
  int64_t waiting_in_sched = 0;  // published by the engine thread for the queue limit
  uint64_t next_id = 1;
  uint64_t rejected = 0, submitted = 0;

  mutable std::mutex metrics_mu;
  EngineMetrics m;
  LatencyHistogram ttft, itl;

  // Engine thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> live;
  Batch batch;
  std::vector<float> logits;
  std::vector<TokenLogprob> top;
  std::vector<std::vector<float>> raw_rows;  // a step's raw logits rows, of those that want logprobs
  uint64_t finished = 0, cancelled = 0, prompt_tokens = 0, generated = 0;
  uint64_t spec_drafted = 0, spec_accepted = 0, spec_drafted_beside = 0;

  std::thread thread;

  std::shared_ptr<const LoadedModel> draft;  // the shared draft model, if any
  std::unique_ptr<BatchedDraftModel> drafter;  // drafts the "draft" requests (made on first use)
  GoodputDraftCap draft_cap;                   // most guesses per sequence, per step

  // SMC-SD requests (engine thread only): one runs at a time, on its own caches.
  std::deque<Sequence*> smc_waiting;
  Sequence* smc_seq = nullptr;
  std::unique_ptr<SmcDecoder> smc;

  Impl(LoadedModel& model, const EngineConfig& config);

  // The engine thread's loop; ending, streaming to and cancelling one sequence.
  void loop();
  void finish(Sequence& s, StreamEvent& ev, const std::string& reason,
              const std::string& error = {});
  void emit(Sequence& s, const StreamEvent& ev);
  void cancel_now(uint64_t id);

  // One step of the SMC-SD request in progress (starting the next waiting one first). Its
  // target passes use the engine's model between the batches; the winning particle is
  // known only at the end, so its tokens are streamed then.
  void step_smc();

  // Guesses for the running sequences about to decode one token that have none yet,
  // capped so the step fits the context and yields no more tokens than the request still
  // wants, and by draft_cap (the best measured goodput at this many speculative
  // sequences); returns how many there are (0: draft_cap not asked, as while a running
  // sequence's prompt is still being prefilled: then no sequence gets guesses).
  // Retrieval drafters propose here; the draft model's sequences are drafted together:
  // `now` before the step's target pass, `beside` (MineDraft overlap) during it, on another
  // thread. Overlap balances the two groups: the sequences holding guesses drafted beside
  // the last step are verified in this one, and of those needing guesses, as many are
  // drafted now as make the groups even (all of them without overlap).
  int plan_drafts(std::vector<DraftRequest>& now, std::vector<DraftRequest>& beside);

  // Ends the sequences whose drafting failed (a bug, not a bad request).
  void fail_drafted(std::span<Sequence* const> seqs, const char* what);
  Sequence* seq_in_slot(int slot);

  // One engine step: drafting, the target's batch, verification. A step of decodes only
  // (no prompt chunk) with speculative sequences tells draft_cap the goodput of its cap.
  void step();

  // Drafts `now`, then runs the target's batch while the drafter drafts `beside`; returns
  // the batch's prompt tokens (-1: nothing ran).
  int64_t draft_and_run(Sequence::Clock::time_point t0, std::vector<DraftRequest>& now,
                        std::vector<DraftRequest>& beside);

  // Schedules and runs one ragged batch through the target, then samples or verifies;
  // returns its prompt tokens (-1: nothing ran, or the pass failed).
  int64_t run_batch(Sequence::Clock::time_point t0);

  // Verifies s's guesses against `rows` (its last token's logits, then each guess's),
  // rolls the K/V of rejected ones back, and streams the accepted ones plus the token
  // verification draws; true when the sequence finished.
  bool on_verify(Sequence& s, std::span<const float> rows);

  // Appends `tok` (sampled from `raw_logits`, read only for logprobs) and streams it;
  // true when the sequence finished.
  bool push_token(Sequence& s, int32_t tok, std::span<const float> raw_logits);

  void update_metrics();
};

}  // namespace brisk
