// The scheduler's decisions without a model: sequences are token lists; "running the
// model" is on_computed() plus appending a sampled token where the plan asked for logits.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

#include "util/error.h"

namespace brisk {
namespace {

std::unique_ptr<Sequence> seq(uint64_t id, int prompt_len, int32_t first_token = 1) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens.resize(static_cast<size_t>(prompt_len));
  std::iota(s->tokens.begin(), s->tokens.end(), first_token);
  s->n_prompt = prompt_len;
  return s;
}

// Runs a planned step: K/V computed, a token "sampled" for every chunk with logits.
void run(Scheduler& s, const StepPlan& p) {
  s.on_computed(p);
  for (const ScheduledChunk& c : p.chunks)
    if (c.logits) c.seq->tokens.push_back(7);
}

int64_t used_blocks(const Scheduler& s) { return s.pool().n_used(); }

TEST(Scheduler, ChunksPrefillWithinTheBudget) {
  BlockPool pool(64, 4);
  Scheduler s({/*token_budget=*/10, /*max_running=*/4, /*n_ctx=*/64}, pool);
  auto a = seq(1, 25);
  s.add(a.get());
  StepPlan p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 0);
  EXPECT_EQ(p.chunks[0].n, 10);
  EXPECT_FALSE(p.chunks[0].logits);
  EXPECT_EQ(a->blocks.size(), 3u);  // 10 positions in blocks of 4
  run(s, p);
  p = s.schedule();
  EXPECT_EQ(p.chunks[0].start, 10);
  EXPECT_EQ(p.chunks[0].n, 10);
  run(s, p);
  p = s.schedule();
  EXPECT_EQ(p.chunks[0].n, 5);
  EXPECT_TRUE(p.chunks[0].logits);  // the prompt's last token: sample after it
  run(s, p);
  EXPECT_EQ(a->n_computed, 25);
  p = s.schedule();  // now a decode
  EXPECT_EQ(p.n_decode, 1);
  EXPECT_EQ(p.chunks[0].n, 1);
  EXPECT_EQ(p.chunks[0].start, 25);
  EXPECT_EQ(a->blocks.size(), 7u);  // position 25 opened a seventh block
  s.remove(a.get());
  EXPECT_EQ(used_blocks(s), 0);
  EXPECT_TRUE(s.idle());
}

TEST(Scheduler, DecodesGoFirstThenPrefillChunks) {
  BlockPool pool(64, 4);
  Scheduler s({8, 4, 64}, pool);
  auto a = seq(1, 3), b = seq(2, 3), c = seq(3, 30);
  s.add(a.get());
  s.add(b.get());
  StepPlan p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 2u);  // both prompts in one step
  run(s, p);
  s.add(c.get());
  p = s.schedule();
  // a and b decode (1 token each), c gets the remaining 6 of the budget.
  ASSERT_EQ(p.chunks.size(), 3u);
  EXPECT_EQ(p.chunks[0].seq, a.get());
  EXPECT_EQ(p.chunks[1].seq, b.get());
  EXPECT_EQ(p.chunks[2].seq, c.get());
  EXPECT_EQ(p.chunks[2].n, 6);
  EXPECT_EQ(p.n_decode, 2);
  EXPECT_EQ(p.n_tokens, 8);
  run(s, p);
  p = s.schedule();
  EXPECT_EQ(p.chunks[2].start, 6);  // c's next chunk
  for (auto* q : {a.get(), b.get(), c.get()}) s.remove(q);
  EXPECT_EQ(used_blocks(s), 0);
}

TEST(Scheduler, PrefillCapBoundsPrefillOnlyBesideDecodes) {
  BlockPool pool(64, 4);
  Scheduler s({/*token_budget=*/32, /*max_running=*/4, /*n_ctx=*/64}, pool);
  s.set_prefill_cap(5);
  auto a = seq(1, 20), b = seq(2, 30);
  s.add(a.get());
  StepPlan p = s.schedule();  // nothing decodes yet: the whole budget
  EXPECT_EQ(p.n_tokens, 20);
  run(s, p);
  s.add(b.get());
  p = s.schedule();  // a decodes: b's prefill gets the cap
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.n_decode, 1);
  EXPECT_EQ(p.chunks[1].seq, b.get());
  EXPECT_EQ(p.chunks[1].n, 5);
  run(s, p);
  s.remove(a.get());
  p = s.schedule();  // a gone: b alone, the whole budget again
  EXPECT_EQ(p.n_decode, 0);
  EXPECT_EQ(p.n_tokens, 25);
  run(s, p);
  s.remove(b.get());
  EXPECT_EQ(used_blocks(s), 0);
}

TEST(Scheduler, MaxRunningLimitsAdmission) {
  BlockPool pool(64, 4);
  Scheduler s({100, 2, 64}, pool);
  auto a = seq(1, 3), b = seq(2, 3), c = seq(3, 3);
  for (auto* q : {a.get(), b.get(), c.get()}) s.add(q);
  StepPlan p = s.schedule();
  EXPECT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(s.running().size(), 2u);
  EXPECT_EQ(s.waiting().size(), 1u);
  run(s, p);
  s.remove(a.get());  // finished: c gets its place
  p = s.schedule();
  EXPECT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[1].seq, c.get());
  for (auto* q : {b.get(), c.get()}) s.remove(q);
  EXPECT_EQ(used_blocks(s), 0);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  BlockPool pool(6, 4);  // 24 positions
  Scheduler s({64, 4, 16}, pool);
  auto a = seq(1, 8), b = seq(2, 8), c = seq(3, 4);
  s.add(a.get());
  s.add(b.get());
  s.add(c.get());
  StepPlan p = s.schedule();
  // a and b take 2 blocks each; c is not admitted: 1 block left is not spare beyond one
  // per running sequence.
  EXPECT_EQ(p.chunks.size(), 2u);
  run(s, p);
  EXPECT_EQ(used_blocks(s), 4);
  p = s.schedule();  // a and b decode position 8: a new block each, the pool is full
  EXPECT_EQ(p.chunks.size(), 2u);
  run(s, p);
  EXPECT_EQ(used_blocks(s), 6);
  // Decode positions 9, 10, 11 fit; at 12 a and b need a block each: none left.
  for (int i = 0; i < 3; ++i) run(s, s.schedule());
  p = s.schedule();
  EXPECT_EQ(s.preemptions(), 1u);
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], b.get());  // the newest
  EXPECT_EQ(b->n_computed, 0);
  EXPECT_TRUE(b->blocks.empty());
  EXPECT_EQ(s.waiting().front(), b.get());  // back at the front of the queue
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, a.get());
  run(s, p);
  s.remove(a.get());  // a finishes: b comes back and recomputes prompt and output
  p = s.schedule();
  ASSERT_GE(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, b.get());
  EXPECT_EQ(p.chunks[0].start, 0);
  EXPECT_EQ(p.chunks[0].n, static_cast<int64_t>(b->tokens.size()));
  EXPECT_TRUE(p.chunks[0].logits);
  for (auto* q : {b.get(), c.get()}) s.remove(q);
  EXPECT_EQ(used_blocks(s), 0);
}

TEST(Scheduler, ContendingSequencesPreemptEachOtherAndBothFinish) {
  BlockPool pool(5, 4);
  Scheduler s({64, 2, 16}, pool);
  auto a = seq(1, 4), b = seq(2, 4);
  s.add(a.get());
  s.add(b.get());
  StepPlan p = s.schedule();
  EXPECT_EQ(p.chunks.size(), 2u);  // both admitted: one block each
  run(s, p);
  // Each grows to 12 tokens (3 blocks); 6 blocks do not fit in 5, so the newer one is
  // preempted (by the older one's decode, or by its own), recomputed later; every step
  // makes progress and both finish.
  for (int i = 0; i < 60 && !s.idle(); ++i) {
    p = s.schedule();
    ASSERT_FALSE(p.empty());
    for (const auto& c : p.chunks) EXPECT_LE(c.seq->blocks.size(), 4u);
    run(s, p);
    for (auto* q : {a.get(), b.get()})
      if (q->n_generated() >= 8 && q->running()) s.remove(q);
  }
  EXPECT_TRUE(s.idle());
  EXPECT_EQ(a->n_generated(), 8);
  EXPECT_EQ(b->n_generated(), 8);
  EXPECT_GT(s.preemptions(), 0u);
  EXPECT_GT(b->preemptions, 0);
  EXPECT_EQ(a->preemptions, 0);
  EXPECT_EQ(used_blocks(s), 0);
}

TEST(Scheduler, PrefixCacheHitsSkipPrefill) {
  BlockPool pool(32, 4, "lru");
  Scheduler s({64, 4, 64}, pool);
  auto a = seq(1, 18);  // 4 full blocks + 2
  s.add(a.get());
  run(s, s.schedule());
  s.remove(a.get());
  EXPECT_EQ(pool.n_cached(), 4);
  EXPECT_EQ(used_blocks(s), 0);
  auto b = seq(2, 14);  // the same first 14 tokens: 3 full blocks
  s.add(b.get());
  StepPlan p = s.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].start, 12);  // 3 blocks from the cache
  EXPECT_EQ(p.chunks[0].n, 2);
  EXPECT_EQ(b->cached_prompt_tokens, 12);
  EXPECT_EQ(s.prefix_hits(), 12u);
  EXPECT_EQ(s.prefix_queries(), 18u + 14u);
  // A prompt of exactly 16 cached tokens still computes its last block's... last token:
  // only 3 blocks are taken, so the 16th token has a block of its own to be written to.
  auto c = seq(3, 16);
  s.add(c.get());
  p = s.schedule();
  const ScheduledChunk* cc = nullptr;
  for (const auto& ch : p.chunks) if (ch.seq == c.get()) cc = &ch;
  ASSERT_NE(cc, nullptr);
  EXPECT_EQ(cc->start, 12);
  EXPECT_EQ(cc->n, 4);
  EXPECT_EQ(pool.refcount(b->blocks[0]), 2);  // shared by b and c
  EXPECT_NE(b->blocks[3], c->blocks[3]);       // the block written to is private
  s.remove(b.get());
  s.remove(c.get());
  EXPECT_EQ(used_blocks(s), 0);
}

TEST(Scheduler, RejectsAPoolTooSmallForOneSequence) {
  BlockPool pool(3, 4);
  EXPECT_THROW(Scheduler({64, 2, 16}, pool), Error);
}

}  // namespace
}  // namespace brisk
