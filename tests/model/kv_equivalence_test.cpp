// The KV cache must not change the answer: the logits of the last token are the same
// whether the prompt is run in one batch, in chunks, or token by token, and whether
// other sequences share the batch.
#include <random>

#include "util/thread_pool.h"

#include "model_test_util.h"

namespace brisk::test {
namespace {

std::vector<int32_t> random_ids(int64_t n, int64_t n_vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(n_vocab - 1));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = d(rng);
  return ids;
}

// Feeds ids in chunks of `chunk` tokens into a fresh cache; logits of the last token.
std::vector<float> chunked_logits(Model& m, const std::vector<int32_t>& ids, int64_t chunk) {
  const int64_t n = static_cast<int64_t>(ids.size());
  KvCache cache(m.cache_shape(1, n));
  std::vector<float> logits;
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t e = std::min(n, s + chunk);
    Batch b;
    for (int64_t i = s; i < e; ++i) b.add(ids[static_cast<size_t>(i)], static_cast<int32_t>(i), 0, i == n - 1);
    m.forward(b, cache, logits);
    EXPECT_EQ(cache.length(0), e);
  }
  return logits;
}

// Chunking changes only how many rows each matmul sees; per row the arithmetic is the
// same, but a kernel may legitimately pick another code path (gemv vs gemm) per batch
// size, so allow float32 rounding noise: logits are O(10), noise well below 1e-4.
constexpr float kTol = 1e-4f;

class KvEquivalence : public ::testing::TestWithParam<int64_t> {};

TEST_P(KvEquivalence, IncrementalEqualsFullRecompute) {
  Model& m = cached_model(nano_dir());
  const int64_t n = GetParam();
  const auto ids = random_ids(n, m.config().n_vocab, static_cast<uint32_t>(n));
  const std::vector<float> full = last_logits(m, ids);
  for (int64_t chunk : {int64_t{1}, int64_t{7}, int64_t{64}}) {
    if (chunk >= n && chunk != 1) continue;
    const std::vector<float> inc = chunked_logits(m, ids, chunk);
    const float d = max_abs_diff(full, inc);
    std::printf("[n=%lld chunk=%lld] max |full - incremental| = %.3g\n", static_cast<long long>(n),
                static_cast<long long>(chunk), d);
    EXPECT_LE(d, kTol) << "n=" << n << " chunk=" << chunk;
  }
}

INSTANTIATE_TEST_SUITE_P(PromptLengths, KvEquivalence, ::testing::Values(1, 2, 17, 100, 1000));

// The bundled Q8_0 model runs the packed integer kernels with 8-bit activations, where a
// last-bit difference in an input can flip an activation's rounding: decode and prefill
// must give the same bits, not merely close ones.
TEST(KvEquivalence, PackedQ8ModelIncrementalEqualsFullBitwise) {
  Model& m = cached_model(source_dir() + "/models/brisk-tiny-q8_0.gguf");
  for (int64_t n : {21, 40}) {
    const auto ids = random_ids(n, m.config().n_vocab, static_cast<uint32_t>(n));
    const std::vector<float> full = last_logits(m, ids);
    for (int64_t chunk : {int64_t{1}, int64_t{20}})
      EXPECT_EQ(max_abs_diff(full, chunked_logits(m, ids, chunk)), 0.0f) << "n=" << n << " chunk=" << chunk;
  }
}

TEST(KvEquivalence, TwoSequencesInOneBatchEqualEachAlone) {
  Model& m = cached_model(nano_dir());
  const int64_t V = m.config().n_vocab;
  const auto a = random_ids(37, V, 1), b = random_ids(50, V, 2);
  const auto a_alone = last_logits(m, a), b_alone = last_logits(m, b);

  KvCache cache(m.cache_shape(2, 64));
  // Interleave the two prompts token by token (the worst case for bookkeeping), with the
  // slots in the "wrong" order: a in slot 1, b in slot 0.
  Batch batch;
  for (size_t i = 0; i < b.size(); ++i) {
    if (i < a.size()) batch.add(a[i], static_cast<int32_t>(i), 1, i + 1 == a.size());
    batch.add(b[i], static_cast<int32_t>(i), 0, i + 1 == b.size());
  }
  std::vector<float> logits;
  m.forward(batch, cache, logits);
  ASSERT_EQ(static_cast<int64_t>(logits.size()), 2 * V);
  const std::vector<float> got_a(logits.begin(), logits.begin() + V), got_b(logits.begin() + V, logits.end());
  EXPECT_LE(max_abs_diff(got_a, a_alone), kTol);
  EXPECT_LE(max_abs_diff(got_b, b_alone), kTol);
  EXPECT_EQ(cache.length(1), 37);
  EXPECT_EQ(cache.length(0), 50);

  // One decode step of both together equals each sequence extended alone.
  const int32_t next_a = 5, next_b = 7;
  batch.clear();
  batch.add(next_b, 50, 0, true);
  batch.add(next_a, 37, 1, true);
  m.forward(batch, cache, logits);
  auto a2 = a, b2 = b;
  a2.push_back(next_a);
  b2.push_back(next_b);
  const std::vector<float> got_b2(logits.begin(), logits.begin() + V), got_a2(logits.begin() + V, logits.end());
  EXPECT_LE(max_abs_diff(got_a2, last_logits(m, a2)), kTol);
  EXPECT_LE(max_abs_diff(got_b2, last_logits(m, b2)), kTol);
}

// With a small model and a few tokens a thread, the threads run whole sequences each
// (LlamaModel::split_by_sequence): the logits, in batch order, and the K/V each sequence
// leaves behind must be those of the sequence run alone, to the bit.
TEST(KvEquivalence, SequencesRunOnSeparateThreadsEqualEachAloneBitwise) {
  Model& m = cached_model(source_dir() + "/models/brisk-tiny-q8_0.gguf");
  const int64_t V = m.config().n_vocab;
  for (int threads : {2, 3}) {
    ThreadPool::set_global_threads(threads);
    const int n_seq = 9;
    std::vector<std::vector<int32_t>> ids;
    KvCache cache(m.cache_shape(n_seq, 64));
    Batch batch;
    for (int s = 0; s < n_seq; ++s) {
      ids.push_back(random_ids(3 + 2 * s, V, 100 + static_cast<uint32_t>(s)));
      batch.add_sequence(ids.back(), 0, s);
    }
    std::vector<float> logits;
    m.forward(batch, cache, logits);
    // Two steps: one token a sequence, then 1-3 tokens a sequence with logits for each
    // (as a verification pass); the second reads the K/V the first wrote.
    for (int step = 0; step < 2; ++step) {
      batch.clear();
      std::vector<std::pair<int, int64_t>> rows;  // (sequence, length of its ids) per logits row
      for (int s = 0; s < n_seq; ++s) {
        const int n_new = step == 0 ? 1 : 1 + s % 3;
        const auto fresh = random_ids(n_new, V, 1000 * (step + 1) + static_cast<uint32_t>(s));
        batch.add_sequence(fresh, static_cast<int32_t>(ids[s].size()), s, true);
        for (int32_t id : fresh) {
          ids[s].push_back(id);
          rows.emplace_back(s, static_cast<int64_t>(ids[s].size()));
        }
      }
      m.forward(batch, cache, logits);
      ASSERT_EQ(static_cast<int64_t>(logits.size()), static_cast<int64_t>(rows.size()) * V);
      for (size_t r = 0; r < rows.size(); ++r) {
        const auto& [s, len] = rows[r];
        const std::vector<int32_t> prefix(ids[s].begin(), ids[s].begin() + len);
        const std::vector<float> got(logits.begin() + r * V, logits.begin() + (r + 1) * V);
        EXPECT_EQ(max_abs_diff(got, last_logits(m, prefix)), 0.0f)
            << threads << " threads, step " << step << ", sequence " << s << ", row " << r;
      }
    }
  }
  ThreadPool::set_global_threads(0);
}

// Speculative rollback: truncating and re-feeding different tokens gives the logits of
// the new sequence, not of the dropped one.
TEST(KvEquivalence, TruncateThenRefeed) {
  Model& m = cached_model(nano_dir());
  const int64_t V = m.config().n_vocab;
  auto ids = random_ids(30, V, 3);
  KvCache cache(m.cache_shape(1, 64));
  Batch b;
  b.add_sequence(ids, 0, 0);
  std::vector<float> logits;
  m.forward(b, cache, logits);
  cache.truncate(0, 20);
  EXPECT_EQ(cache.length(0), 20);
  ids.resize(20);
  const auto tail = random_ids(5, V, 4);
  b.clear();
  b.add_sequence(tail, 20, 0);
  m.forward(b, cache, logits);
  ids.insert(ids.end(), tail.begin(), tail.end());
  EXPECT_LE(max_abs_diff(logits, last_logits(m, ids)), kTol);
  cache.clear(0);
  EXPECT_EQ(cache.length(0), 0);
}

}  // namespace
}  // namespace brisk::test
