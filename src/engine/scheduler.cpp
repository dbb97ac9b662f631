#include "engine/scheduler.h"

#include <algorithm>

#include "kv/block_hash.h"
#include "util/error.h"

namespace brisk {

Scheduler::Scheduler(const SchedulerConfig& config, BlockPool& pool, KvCache* kv)
    : cfg_(config), pool_(pool), kv_(kv), bs_(pool.block_size()) {
  if (cfg_.token_budget < 1) fail("scheduler: token budget must be >= 1, got {}", cfg_.token_budget);
  if (cfg_.max_running < 1) fail("scheduler: max_running must be >= 1, got {}", cfg_.max_running);
  if (blocks_for(cfg_.n_ctx) > pool_.n_blocks())
    fail("scheduler: {} KV blocks of {} positions cannot hold one sequence of {} positions",
         pool_.n_blocks(), bs_, cfg_.n_ctx);
  if (kv_ && (kv_->n_seq() < cfg_.max_running || kv_->block_size() != bs_ ||
              kv_->n_blocks() != pool_.n_blocks() || !kv_->managed()))
    fail("scheduler: the KV cache does not match the block pool and max_running");
  for (int i = cfg_.max_running - 1; i >= 0; --i) free_slots_.push_back(i);
}

int64_t Scheduler::blocks_for(int64_t positions) const { return (positions + bs_ - 1) / bs_; }

void Scheduler::add(Sequence* seq) { waiting_.push_back(seq); }

bool Scheduler::push_block(Sequence* s) {
  const int32_t b = pool_.allocate();
  if (b < 0) return false;
  if (kv_ && s->slot >= 0) kv_->set_block(s->slot, static_cast<int64_t>(s->blocks.size()), b);
  s->blocks.push_back(b);
  return true;
}

int64_t Scheduler::slots(const Sequence* s, int64_t positions) const {
  return kv_ && kv_->evicting() && s->slot >= 0 ? kv_->max_slots(s->slot, positions) : positions;
}

int64_t Scheduler::grow(Sequence* s, int64_t n) {
  const int64_t need = blocks_for(slots(s, s->n_computed + n));
  while (static_cast<int64_t>(s->blocks.size()) < need && push_block(s)) {
  }
  return std::min<int64_t>(n, static_cast<int64_t>(s->blocks.size()) * bs_ - slots(s, s->n_computed));
}

void Scheduler::trim(Sequence* s) {
  const int64_t keep = blocks_for(slots(s, s->n_computed));
  while (static_cast<int64_t>(s->blocks.size()) > keep) {
    kv_->set_block(s->slot, static_cast<int64_t>(s->blocks.size()) - 1, -1);
    pool_.unref(s->blocks.back());
    s->blocks.pop_back();
  }
}

void Scheduler::release_blocks(Sequence* s) {
  // Deepest first, so that among blocks released together the prefix outlives its tail.
  for (auto it = s->blocks.rbegin(); it != s->blocks.rend(); ++it) pool_.unref(*it);
  s->blocks.clear();
  s->drafts.clear();
  s->n_computed = 0;
  s->n_published = 0;
  if (s->slot >= 0) {
    if (kv_) kv_->reset_slot(s->slot);
    free_slots_.push_back(s->slot);
    s->slot = -1;
  }
}

void Scheduler::remove(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end())
    running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end())
    waiting_.erase(it);
  release_blocks(seq);
}

void Scheduler::preempt(Sequence* victim, StepPlan& plan) {
  running_.erase(std::find(running_.begin(), running_.end(), victim));
  release_blocks(victim);
  ++victim->preemptions;
  ++preemptions_;
  waiting_.push_front(victim);
  plan.preempted.push_back(victim);
}

void Scheduler::plan_chunk(StepPlan& plan, Sequence* s, int64_t n, int64_t n_draft) {
  const bool logits = s->n_computed + n - n_draft == static_cast<int64_t>(s->tokens.size());
  plan.chunks.push_back({s, s->n_computed, n, logits, n_draft});
  plan.n_tokens += n;
}

void Scheduler::ensure_hashes(Sequence* s, int64_t n_blocks) {
  while (static_cast<int64_t>(s->hashes.size()) < n_blocks) {
    const int64_t i = static_cast<int64_t>(s->hashes.size());
    if ((i + 1) * bs_ > static_cast<int64_t>(s->tokens.size())) break;
    const uint64_t parent = i == 0 ? kRootBlockHash : s->hashes[static_cast<size_t>(i - 1)];
    s->hashes.push_back(hash_block(parent, s->tokens.data() + i * bs_, bs_));
  }
}

bool Scheduler::admit_one(StepPlan& plan, int64_t& budget) {
  Sequence* s = waiting_.front();
  const int64_t len = static_cast<int64_t>(s->tokens.size());
  // Enough blocks for the whole remaining prompt, beyond a spare one per running sequence?
  // (Cached blocks count as available: allocate() evicts them. The prefix we may reuse
  // is counted too, which errs on the safe side.)
  const int64_t reserve = static_cast<int64_t>(running_.size());
  if (blocks_for(len) > pool_.n_available() - reserve && !running_.empty()) return false;

  s->slot = free_slots_.back();
  free_slots_.pop_back();
  // Reuse the longest cached prefix of full blocks, leaving at least the last token to
  // compute (its logits give the next token).
  int64_t matched = 0;
  if (pool_.caching()) {
    const int64_t max_blocks = (len - 1) / bs_;
    ensure_hashes(s, max_blocks);
    for (int64_t i = 0; i < max_blocks; ++i) {
      const int32_t b = pool_.lookup(s->hashes[static_cast<size_t>(i)], s->tokens.data() + i * bs_);
      if (b < 0) break;
      if (kv_) kv_->set_block(s->slot, i, b);
      s->blocks.push_back(b);
      ++matched;
    }
    prefix_queries_ += static_cast<uint64_t>(len);
    prefix_hits_ += static_cast<uint64_t>(matched * bs_);
  }
  s->n_computed = matched * bs_;
  s->n_published = matched;
  if (kv_) kv_->set_length(s->slot, s->n_computed);
  const int64_t n = grow(s, std::min(s->n_pending(), budget));
  if (n <= 0) {  // not even one block: undo
    release_blocks(s);
    return false;
  }
  if (!s->admitted_before) {
    s->cached_prompt_tokens = matched * bs_;
    s->admitted_before = true;
  }
  waiting_.pop_front();
  s->admit_order = ++admit_counter_;
  running_.push_back(s);
  plan_chunk(plan, s, n);
  budget -= n;
  return true;
}

StepPlan Scheduler::schedule() {
  for (;;) {
    StepPlan plan;
    int64_t budget = cfg_.token_budget;
    // 1. Decodes, oldest first; preempt the newest when a block is missing.
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Sequence* s = running_[i];
      if (s->n_pending() != 1 || s->drafting) continue;
      bool self_preempted = false;
      while (grow(s, 1) < 1) {
        Sequence* victim = running_.back();
        preempt(victim, plan);
        if (victim == s) {
          self_preempted = true;
          break;
        }
      }
      if (self_preempted) break;  // s was the newest: nothing after it is running
      int64_t d = std::min<int64_t>(static_cast<int64_t>(s->drafts.size()), budget - 1);
      d = d > 0 ? grow(s, 1 + d) - 1 : 0;
      s->drafts.resize(static_cast<size_t>(d));
      plan_chunk(plan, s, 1 + d, d);
      ++plan.n_decode;
      budget -= 1 + d;
    }
    // 2. Next chunks of running prefills.
    if (plan.n_decode > 0) budget = std::min(budget, prefill_cap_);
    for (Sequence* s : running_) {
      if (budget <= 0) break;
      if (s->n_pending() <= 1) continue;
      const int64_t n = grow(s, std::min(s->n_pending(), budget));
      if (n <= 0) continue;
      plan_chunk(plan, s, n);
      budget -= n;
    }
    // 3. Admissions.
    while (budget > 0 && static_cast<int>(running_.size()) < cfg_.max_running &&
           !waiting_.empty() && admit_one(plan, budget)) {
    }
    // Nothing could run although sequences are running: they all wait for blocks that
    // only they hold. Free the newest and try again (terminates: one sequence alone
    // always fits, see the constructor).
    // (Sequences whose guesses are being drafted beside the step wait for the next one.)
    if (plan.empty() && !running_.empty() &&
        std::none_of(running_.begin(), running_.end(), [](const Sequence* s) { return s->drafting; })) {
      StepPlan p;
      preempt(running_.back(), p);
      continue;
    }
    return plan;
  }
}

void Scheduler::on_computed(const StepPlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    Sequence* s = c.seq;
    s->n_computed = c.start + c.n - c.n_draft;  // guesses count once verified (by the engine)
    if (kv_ && kv_->evicting()) trim(s);  // eviction compacted it: free the blocks past its slots
    if (!pool_.caching()) continue;
    // Offer the blocks that became full to the prefix cache.
    const int64_t full = s->n_computed / bs_;
    if (full <= s->n_published) continue;
    ensure_hashes(s, full);
    for (int64_t i = s->n_published; i < full; ++i) {
      const uint64_t parent = i == 0 ? kRootBlockHash : s->hashes[static_cast<size_t>(i - 1)];
      pool_.publish(s->blocks[static_cast<size_t>(i)], s->hashes[static_cast<size_t>(i)], parent,
                    s->tokens.data() + i * bs_, i);
    }
    s->n_published = full;
  }
}

}  // namespace brisk
