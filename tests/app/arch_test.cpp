// Other architectures (qwen2, qwen3, mistral, llama with Llama-3 rope scaling): random-weight
// fixtures whose logits transformers computed (tests/fixtures/arch/README.md). test_model
// checks the Hugging Face folders; this checks the GGUF that `brisk convert` makes of them
// (q/k rows permuted for llama/mistral, rope_freqs carried for Llama-3 scaling).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "model/model.h"

namespace brisk::test {
namespace {

using nlohmann::json;

// max |a - b| / max |b|: the error relative to the scale of the logits.
double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num = std::max(num, std::abs(double(a[i]) - b[i]));
    den = std::max(den, std::abs(double(b[i])));
  }
  return num / den;
}

void check_model(Model& model, const json& ref, const std::string& label) {
  const int64_t n_vocab = model.config().n_vocab;
  for (const char* name : {"long", "short"}) {
    const json& s = ref["sequences"][name];
    std::vector<int32_t> ids = s["input_ids"].get<std::vector<int32_t>>();
    KvCache cache(model.cache_shape(1, 128));
    Batch batch;
    batch.add_sequence(ids, 0, 0, /*all_logits=*/true);
    std::vector<float> logits;
    model.forward(batch, cache, logits);
    ASSERT_EQ(logits.size(), ids.size() * n_vocab);
    std::vector<float> last(logits.end() - n_vocab, logits.end());
    EXPECT_LT(rel_error(last, s["last_logits"].get<std::vector<float>>()), 1e-3)
        << label << " " << name << " last-position logits";
    // ids 0..7 at every position catch position-dependent (RoPE) errors.
    std::vector<float> got8, want8;
    for (size_t p = 0; p < ids.size(); ++p)
      for (int v = 0; v < 8; ++v) {
        got8.push_back(logits[p * n_vocab + v]);
        want8.push_back(s["all_positions_logits_first8"][p][v].get<float>());
      }
    EXPECT_LT(rel_error(got8, want8), 1e-3) << label << " " << name << " per-position logits";
    if (s.contains("greedy_ids")) {
      std::vector<int32_t> out;
      int32_t next = static_cast<int32_t>(
          std::max_element(last.begin(), last.end()) - last.begin());
      for (int i = 0; i < 16; ++i) {
        out.push_back(next);
        batch.clear();
        batch.add(next, static_cast<int32_t>(ids.size() + i), 0, true);
        model.forward(batch, cache, logits);
        next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      }
      EXPECT_EQ(out, s["greedy_ids"].get<std::vector<int32_t>>()) << label << " greedy";
    }
  }
}

class ArchFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchFixture, ConvertedGgufMatchesTransformers) {
  std::string dir = source_path("tests/fixtures/arch/" + GetParam());
  json ref = json::parse(std::ifstream(dir + "/reference.json"));
  std::string out = temp_path(GetParam() + "-f32.gguf");
  CliResult r = run_brisk({"convert", dir, out, "--type", "f32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto model = load_model(out);
  EXPECT_FALSE(model->source().hf_layout);
  check_model(*model, ref, GetParam() + " (GGUF)");
}

INSTANTIATE_TEST_SUITE_P(Arch, ArchFixture,
                         ::testing::Values("qwen2", "qwen3", "mistral", "llama3"));

}  // namespace
}  // namespace brisk::test
