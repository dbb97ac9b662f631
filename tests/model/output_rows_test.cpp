// Model::set_output_rows (FR-Spec draft heads): the logits of a subset of the vocabulary
// equal the whole vocabulary's logits of those tokens, bit for bit, for a tied Q8_0 output
// matrix and an untied one, and bad subsets are refused.
#include <random>

#include "kv/kv_cache.h"
#include "model_test_util.h"
#include "util/error.h"

namespace brisk::test {
namespace {

std::vector<float> logits_of(Model& m, const std::vector<int32_t>& tokens) {
  KvCache cache(m.cache_shape(1, 64));
  Batch b;
  for (size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], static_cast<int32_t>(i), 0, i + 2 >= tokens.size());
  std::vector<float> out;
  m.forward(b, cache, out);
  return out;
}

void expect_subset_logits(const std::string& path) {
  std::unique_ptr<Model> m = load_model(path);
  const int32_t n_vocab = m->config().n_vocab;
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> tok(0, n_vocab - 1);
  std::vector<int32_t> prompt(9);
  for (auto& t : prompt) t = tok(rng);
  const std::vector<float> all = logits_of(*m, prompt);
  ASSERT_EQ(all.size(), 2u * n_vocab);

  // 37 distinct random ids in random order (not a multiple of the 16-row packing).
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(37);
  m->set_output_rows(ids);
  EXPECT_EQ(m->n_logits(), 37);
  const std::vector<float> sub = logits_of(*m, prompt);
  ASSERT_EQ(sub.size(), 2u * 37);
  std::vector<float> spread(static_cast<size_t>(n_vocab));
  for (int row = 0; row < 2; ++row) {
    for (size_t i = 0; i < ids.size(); ++i)
      EXPECT_EQ(sub[row * 37 + i], all[row * n_vocab + ids[i]]) << path << " row " << row << " token " << ids[i];
    m->vocab_logits(sub.data() + row * 37, spread.data());
    for (int32_t id = 0; id < n_vocab; ++id) {
      const bool kept = std::find(ids.begin(), ids.end(), id) != ids.end();
      if (kept) EXPECT_EQ(spread[id], all[row * n_vocab + id]);
      else EXPECT_EQ(spread[id], -std::numeric_limits<float>::infinity());
    }
  }
  m->set_output_rows({});  // back to the whole vocabulary
  EXPECT_EQ(logits_of(*m, prompt), all);

  EXPECT_THROW(m->set_output_rows({1, 2, n_vocab}), Error);
  EXPECT_THROW(m->set_output_rows({5, 7, 5}), Error);
  EXPECT_THROW(m->set_output_rows({-1}), Error);
  EXPECT_EQ(m->n_logits(), n_vocab);  // a refused subset leaves the model as it was
}

TEST(OutputRows, SubsetLogitsEqualTheWholeVocabularysTiedQ8_0) {
  expect_subset_logits(source_dir() + "/models/brisk-tiny-q8_0.gguf");
}

TEST(OutputRows, SubsetLogitsEqualTheWholeVocabularysUntied) {
  expect_subset_logits(source_dir() + "/tests/fixtures/arch/llama3");
}

}  // namespace
}  // namespace brisk::test
