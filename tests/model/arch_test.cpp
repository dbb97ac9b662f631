// Architecture variants against Hugging Face transformers: tiny random-weight qwen2 (q/k/v
// biases), qwen3 (per-head q/k RMSNorm, head_dim != hidden/heads, tied), mistral (one KV
// head) and llama3 (rope scaling via rope_freqs) models in tests/fixtures/arch, with
// float32 reference logits (see the README there).
#include <cstdio>

#include "model_test_util.h"
#include "model/rope_freqs.h"
#include "model/weights.h"

namespace brisk::test {
namespace {

// float32 rounding noise of these models is ~1e-5 (README: f32 vs f64 <= 1e-5).
constexpr double kTol = 1e-4;

class ArchVsTransformers : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    const std::string dir = source_dir() + "/tests/fixtures/arch/" + GetParam();
    ref_ = read_json(dir + "/reference.json");
    model_ = &cached_model(dir);
  }
  nlohmann::json ref_;
  Model* model_ = nullptr;
};

TEST_P(ArchVsTransformers, LogitsAtEveryPosition) {
  const int64_t V = model_->config().n_vocab;
  double worst = 0;
  for (const char* s : {"long", "short"}) {
    const auto& seq = ref_["sequences"][s];
    const std::vector<int32_t> ids = ids_of(seq["input_ids"]);
    const int64_t n = static_cast<int64_t>(ids.size());
    KvCache cache(model_->cache_shape(1, n));
    Batch b;
    b.add_sequence(ids, 0, 0, /*all_logits=*/true);
    std::vector<float> logits;
    model_->forward(b, cache, logits);
    ASSERT_EQ(static_cast<int64_t>(logits.size()), n * V);

    const auto last = seq["last_logits"].get<std::vector<double>>();
    ASSERT_EQ(static_cast<int64_t>(last.size()), V);
    for (int64_t i = 0; i < V; ++i) {
      const double d = std::fabs(logits[(n - 1) * V + i] - last[i]);
      worst = std::max(worst, d);
      ASSERT_LE(d, kTol) << s << " last position, id " << i;
    }
    const auto first8 = seq["all_positions_logits_first8"].get<std::vector<std::vector<double>>>();
    ASSERT_EQ(static_cast<int64_t>(first8.size()), n);
    for (int64_t p = 0; p < n; ++p)
      for (size_t i = 0; i < first8[p].size(); ++i) {
        const double d = std::fabs(logits[p * V + i] - first8[p][i]);
        worst = std::max(worst, d);
        ASSERT_LE(d, kTol) << s << " position " << p << ", id " << i;
      }
  }
  std::printf("[%s] max abs logit error: %.3g\n", GetParam(), worst);
}

TEST_P(ArchVsTransformers, GreedyWithKvCache) {
  const int64_t V = model_->config().n_vocab;
  const auto& seq = ref_["sequences"]["short"];
  const std::vector<int32_t> prompt = ids_of(seq["input_ids"]), want = ids_of(seq["greedy_ids"]);
  const int64_t n = static_cast<int64_t>(prompt.size());
  KvCache cache(model_->cache_shape(1, n + static_cast<int64_t>(want.size())));
  Batch b;
  b.add_sequence(prompt, 0, 0);
  std::vector<float> logits;
  model_->forward(b, cache, logits);
  std::vector<int32_t> got;
  for (size_t step = 0; step < want.size(); ++step) {
    got.push_back(argmax(logits.data(), V));
    b.clear();
    b.add(got.back(), static_cast<int32_t>(n + step), 0, true);
    model_->forward(b, cache, logits);
  }
  EXPECT_EQ(got, want);
}

// RoPE frequencies equal transformers' inv_freq buffer, scaled ones (llama3) included.
TEST_P(ArchVsTransformers, RopeInvFreqMatchesTransformers) {
  const ModelConfig& c = model_->config();
  const Weights w = load_weights(model_->source(), c);
  const std::vector<float> got = rope_inv_freq(c.rope_base, c.head_dim, w.rope_freqs);
  const auto want = ref_["rotary_inv_freq"].get<std::vector<double>>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << i;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ArchVsTransformers, ::testing::Values("qwen2", "qwen3", "mistral", "llama3"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace brisk::test
