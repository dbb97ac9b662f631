// The scheduler: which tokens of which sequences the next engine step computes.
//
// Continuous batching (Orca, OSDI '22) with chunked prefill (Sarathi-Serve, OSDI '24) over
// paged KV blocks (vLLM, SOSP '23). Every step has a token budget:
//   1. running sequences that decode (one pending token) go first, oldest first; a decode
//      that needs a new block and finds none preempts the most recently admitted running
//      sequence (its blocks are freed; it goes back to the front of the queue and is
//      recomputed later, prompt and generated tokens alike) — or itself, if it is that one;
//      its speculative guesses (seq->drafts) ride along as far as budget and free blocks
//      allow, never preempting anything; a sequence whose guesses are being drafted beside
//      the step (seq->drafting, MineDraft overlap) waits for the next step;
//   2. running sequences still prefilling get the next chunk of their prompt (when the step
//      has decodes, at most the prefill cap in all, so decodes' latency stays even);
//   3. waiting sequences are admitted in order while the budget, max_running, and the free
//      blocks allow: first the longest cached prefix of full blocks is taken from the
//      prefix cache (its prefill skipped), then a first chunk is scheduled. A sequence is
//      admitted only when the blocks of its whole remaining prompt are available beyond one
//      spare block per running sequence, so admitting it does not at once force preemptions.
// Finished and cancelled sequences are removed with remove(), which frees their blocks.
// With token eviction (the KV cache's --kv-evict) a sequence's block table holds slots,
// not positions: it grows by the slots a chunk adds and shrinks back after each step, so
// a sequence holds about its budget's worth of blocks whatever its length.
//
// The scheduler does not run the model: the engine builds a Batch from the plan, runs it,
// and calls on_computed() (the sequences' K/V advanced, full blocks published to the
// prefix cache).
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/sequence.h"
#include "kv/block_pool.h"
#include "kv/kv_cache.h"

namespace brisk {

struct SchedulerConfig {
  int64_t token_budget = 512;
  int max_running = 8;
  int64_t n_ctx = 2048;
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t start = 0;  // first position computed (== seq->n_computed when planned)
  int64_t n = 0;      // tokens
  bool logits = false;  // the chunk ends at the sequence's last token: sample after it
  int64_t n_draft = 0;  // the chunk's last n_draft tokens are seq->drafts (logits for all)
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // decodes first, then prefill chunks
  std::vector<Sequence*> preempted;    // sent back to waiting during this planning
  int64_t n_tokens = 0;
  int64_t n_decode = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  // `kv` (optional) gets the running sequences' block tables in their slots (max_running
  // slots); without it the scheduler only does the bookkeeping (tests).
  Scheduler(const SchedulerConfig& config, BlockPool& pool, KvCache* kv = nullptr);

  void add(Sequence* seq);     // to the back of the waiting queue
  void remove(Sequence* seq);  // from wherever it is; its blocks and slot are released
  StepPlan schedule();
  void on_computed(const StepPlan& plan);
  // Prompt tokens a step may prefill when it also has decodes (engine/prefill_pacer.h);
  // the token budget still bounds the whole step.
  void set_prefill_cap(int64_t n) { prefill_cap_ = n; }

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }
  bool idle() const { return waiting_.empty() && running_.empty(); }
  uint64_t preemptions() const { return preemptions_; }
  uint64_t prefix_queries() const { return prefix_queries_; }  // prompt tokens looked up
  uint64_t prefix_hits() const { return prefix_hits_; }        // of which found cached
  const BlockPool& pool() const { return pool_; }

 private:
  int64_t blocks_for(int64_t positions) const;
  // Grows seq's blocks so n more tokens fit (no preemption); returns how many fit.
  int64_t grow(Sequence* s, int64_t n);
  // Block-table entries `positions` positions of s take: fewer than positions once token
  // eviction (kv/token_eviction.h) compacted them.
  int64_t slots(const Sequence* s, int64_t positions) const;
  // Frees s's blocks past its slots (after eviction compacted it).
  void trim(Sequence* s);
  bool push_block(Sequence* s);  // one more block; false when none is available
  void release_blocks(Sequence* s);
  void preempt(Sequence* victim, StepPlan& plan);
  bool admit_one(StepPlan& plan, int64_t& budget);
  void ensure_hashes(Sequence* s, int64_t n_blocks);
  void plan_chunk(StepPlan& plan, Sequence* s, int64_t n, int64_t n_draft = 0);

  SchedulerConfig cfg_;
  BlockPool& pool_;
  KvCache* kv_;
  int64_t bs_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // in admission order
  std::vector<int> free_slots_;
  int64_t prefill_cap_ = INT64_MAX;
  uint64_t admit_counter_ = 0, preemptions_ = 0, prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace brisk
