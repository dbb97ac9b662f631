// The batched draft model (engine/batched_draft_model.h): drafting for several sequences
// in shared ragged passes must give each sequence the guesses a fresh single-sequence
// drafter gives it from scratch, over rounds that roll back rejected guesses, hand a slot
// to another sequence, and run on the calling thread alone (the MineDraft drafter thread).
#include <gtest/gtest.h>

#include <random>

#include "engine/batched_draft_model.h"
#include "engine/draft_model.h"
#include "engine_test_util.h"

namespace brisk::test {
namespace {

std::shared_ptr<const LoadedModel> nano_draft() {
  static auto m = std::make_shared<const LoadedModel>(load_for_generation(BRISK_SOURCE_DIR "/tests/fixtures/brisk-nano"));
  return m;
}

std::vector<int32_t> ids(const std::vector<DraftToken>& d) {
  std::vector<int32_t> out;
  for (const DraftToken& t : d) out.push_back(t.id);
  return out;
}

TEST(BatchedDraftModel, EqualsAFreshDrafterPerSequenceAcrossRollbacksAndSlotReuse) {
  const auto draft = nano_draft();
  const int32_t n_vocab = static_cast<int32_t>(draft->model->config().n_vocab);
  const int n = 4;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> any_id(1, n_vocab - 1);
  std::vector<std::vector<int32_t>> tokens(n);
  for (int i = 0; i < n; ++i) {
    tokens[i].resize(static_cast<size_t>(5 + 9 * i));
    for (int32_t& t : tokens[i]) t = any_id(rng);
  }
  std::vector<Sampler> samplers;
  for (int i = 0; i < n; ++i) {
    SamplingParams p;
    p.temperature = i % 2 ? 0.8f : 0.0f;  // greedy and sampled guesses
    p.seed = 100 + static_cast<uint64_t>(i);
    samplers.emplace_back(draft_sampling(p));
  }
  BatchedDraftModel batched(draft, n, 160);
  std::vector<int> slot = {0, 1, 2, 3};
  int rolled_back = 0;
  for (int round = 0; round < 6; ++round) {
    if (round == 3) std::swap(slot[0], slot[2]);  // each now continues the other's cached tokens
    std::vector<std::vector<DraftToken>> got(n), want(n);
    std::vector<DraftRequest> reqs;
    for (int i = 0; i < n; ++i) {
      const int k = 1 + (round + i) % 5;
      // The reference: a new one-slot drafter (nothing cached) with a copy of the sampler.
      Sampler ref_sampler = samplers[i];
      BatchedDraftModel fresh(draft, 1, 160);
      const DraftRequest ref{0, tokens[i], k, &ref_sampler, &want[i]};
      fresh.propose(std::span<const DraftRequest>(&ref, 1));
      reqs.push_back({slot[i], tokens[i], k, &samplers[i], &got[i]});
    }
    batched.propose(reqs, /*serial=*/round % 2 == 1);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(static_cast<int>(got[i].size()), 1 + (round + i) % 5) << "round " << round << " seq " << i;
      EXPECT_EQ(ids(got[i]), ids(want[i])) << "round " << round << " seq " << i;
      // Verification accepts some guesses and puts another token after them: the rest of
      // the guesses' K/V in the draft's slot is stale and must be rolled back.
      const size_t accept = static_cast<size_t>(rng() % (got[i].size() + 1));
      for (size_t j = 0; j < accept; ++j) tokens[i].push_back(got[i][j].id);
      int32_t next = any_id(rng);
      if (accept < got[i].size() && next == got[i][accept].id) next = next % (n_vocab - 1) + 1;
      tokens[i].push_back(next);
      rolled_back += accept < got[i].size();
    }
  }
  EXPECT_GT(rolled_back, 5);
  // A sequence longer than its slot holds drafts from its last capacity - k tokens, at
  // positions from 0: the guesses of a fresh drafter given only those (the others' guesses
  // are unchanged).
  std::vector<int32_t> long_tokens(158);
  for (int32_t& t : long_tokens) t = any_id(rng);
  std::vector<DraftToken> windowed, some, want_windowed, want_some;
  Sampler s0 = samplers[0], s1 = samplers[1], r0 = samplers[0], r1 = samplers[1];
  const std::vector<DraftRequest> reqs = {{0, long_tokens, 3, &s0, &windowed}, {1, tokens[1], 2, &s1, &some}};
  batched.propose(reqs);
  const std::vector<int32_t> tail(long_tokens.end() - 157, long_tokens.end());
  BatchedDraftModel fresh0(draft, 1, 160), fresh1(draft, 1, 160);
  const DraftRequest ref0{0, tail, 3, &r0, &want_windowed}, ref1{0, tokens[1], 2, &r1, &want_some};
  fresh0.propose(std::span<const DraftRequest>(&ref0, 1));
  fresh1.propose(std::span<const DraftRequest>(&ref1, 1));
  EXPECT_EQ(windowed.size(), 3u);
  EXPECT_EQ(ids(windowed), ids(want_windowed));
  EXPECT_EQ(ids(some), ids(want_some));
}

// A new sequence longer than kWindow: the draft reads only its last kWindow tokens, and
// then follows it token by token as any other.
TEST(BatchedDraftModel, ReadsOnlyTheLastWindowOfALongNewSequence) {
  const auto draft = nano_draft();
  const int32_t n_vocab = static_cast<int32_t>(draft->model->config().n_vocab);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> any_id(1, n_vocab - 1);
  const int64_t W = BatchedDraftModel::kWindow;
  std::vector<int32_t> tokens(static_cast<size_t>(W + 300));
  for (int32_t& t : tokens) t = any_id(rng);
  SamplingParams argmax;
  argmax.temperature = 0;
  Sampler greedy(draft_sampling(argmax));
  BatchedDraftModel model(draft, 1, 1024);
  EXPECT_EQ(model.lag(0, tokens), W);
  for (int round = 0; round < 3; ++round) {
    std::vector<DraftToken> got, want;
    const DraftRequest r{0, tokens, 3, &greedy, &got};
    model.propose(std::span<const DraftRequest>(&r, 1));
    // The reference drafts from the same window, fresh.
    const std::vector<int32_t> window(tokens.end() - (W + round), tokens.end());
    BatchedDraftModel fresh(draft, 1, 1024);
    const DraftRequest ref{0, window, 3, &greedy, &want};
    fresh.propose(std::span<const DraftRequest>(&ref, 1));
    EXPECT_EQ(ids(got), ids(want)) << "round " << round;
    EXPECT_EQ(model.lag(0, tokens), 1);
    tokens.push_back(got[0].id);  // one guess accepted (the rest rolled back): lag 1 again
    EXPECT_EQ(model.lag(0, tokens), 1);
  }
  // The slot passes to a sequence shorter than where the long one's window began: read
  // from its start, as a fresh drafter would.
  const std::vector<int32_t> short_seq(tokens.begin(), tokens.begin() + 40);
  std::vector<DraftToken> got, want;
  EXPECT_EQ(model.lag(0, short_seq), 40);
  const DraftRequest r{0, short_seq, 3, &greedy, &got};
  model.propose(std::span<const DraftRequest>(&r, 1));
  BatchedDraftModel fresh(draft, 1, 1024);
  const DraftRequest ref{0, short_seq, 3, &greedy, &want};
  fresh.propose(std::span<const DraftRequest>(&ref, 1));
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(ids(got), ids(want));
}

// Text that repeats: once the draft's own guess is what followed the last 3 tokens before,
// the rest of that earlier continuation becomes the guesses without more draft passes.
TEST(BatchedDraftModel, CopiesTheContextOnceItAgreesWithTheDraftsGuess) {
  const auto draft = nano_draft();
  const std::vector<int32_t> line = draft->tokenizer->encode("the cat sat on the mat. ", false, false);
  ASSERT_GE(line.size(), 6u);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 4; ++i) tokens.insert(tokens.end(), line.begin(), line.end());
  tokens.insert(tokens.end(), line.begin(), line.begin() + 3);  // "the cat sat" again
  Sampler greedy(draft_sampling(SamplingParams{}));

  // The draft's own first guess, alone (k = 1: nothing to copy after it).
  std::vector<DraftToken> first;
  BatchedDraftModel one(draft, 1, 160);
  const DraftRequest r1{0, tokens, 1, &greedy, &first};
  one.propose(std::span<const DraftRequest>(&r1, 1));
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].id, line[3]) << "the test needs a draft that continues the repeated line";

  // k = 4: that guess, then the line's next three tokens copied, after one pass (pass 0).
  std::vector<DraftToken> got;
  BatchedDraftModel four(draft, 1, 160);
  const DraftRequest r4{0, tokens, 4, &greedy, &got};
  EXPECT_EQ(four.lag(0, tokens), static_cast<int64_t>(tokens.size()));  // a new sequence: all of it
  EXPECT_EQ(four.catch_up_seconds_per_token(), 0);
  four.propose(std::span<const DraftRequest>(&r4, 1));
  EXPECT_EQ(four.lag(0, tokens), 1);  // in step: only the last token is fed again
  EXPECT_EQ(four.catch_up_seconds_per_token(), 0);  // under 64 tokens: not timed
  EXPECT_EQ(ids(got), std::vector<int32_t>(line.begin() + 3, line.begin() + 7));
  EXPECT_EQ(four.passes(), 1);
  for (const DraftToken& t : got) EXPECT_TRUE(t.q.empty());  // greedy and copied: point masses

  // Without a repetition the draft runs a pass per guess but the last: 4 passes for k = 4.
  std::vector<int32_t> plain(line.begin(), line.end());
  BatchedDraftModel fresh(draft, 1, 160);
  const DraftRequest rp{0, plain, 4, &greedy, &got};
  fresh.propose(std::span<const DraftRequest>(&rp, 1));
  EXPECT_EQ(got.size(), 4u);
  EXPECT_EQ(fresh.passes(), 4);

  // A catch-up of 64 tokens or more is timed (engine_speculation.cpp weighs it).
  std::vector<int32_t> long_prompt;
  while (long_prompt.size() < 64) long_prompt.insert(long_prompt.end(), tokens.begin(), tokens.end());
  BatchedDraftModel timed(draft, 1, 160);
  const DraftRequest rl{0, long_prompt, 2, &greedy, &got};
  timed.propose(std::span<const DraftRequest>(&rl, 1));
  EXPECT_GT(timed.catch_up_seconds_per_token(), 0);
  EXPECT_EQ(timed.lag(0, long_prompt), 1);
}

}  // namespace
}  // namespace brisk::test
