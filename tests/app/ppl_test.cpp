// `brisk ppl` reproduces transformers' figure under llama-perplexity's protocol (ctx 1024,
// second half of each window scored) on dev.txt: through each model's F16 GGUF within 0.5%
// (compute is F32), and the bundled Q8_0 within 1% of F16. The Hugging Face folder of each
// model scores the first two windows as its F16 GGUF does (same weights, same compute, only
// the loader differs): the whole text through both took ~10 of CI's 13 test minutes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli.h"

namespace brisk::test {
namespace {

using nlohmann::json;

double reference_ppl(const std::string& dir) {
  json ref = json::parse(std::ifstream(dir + "/reference.json"));
  return ref["dev_llama_perplexity_protocol_ctx1024"]["ppl"].get<double>();
}

json run_ppl(const std::string& model, const std::string& text) {
  CliResult r = run_brisk({"ppl", "-m", model, "-f", text, "-c", "1024", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

double ppl(const std::string& model) {
  json out = run_ppl(model, source_path("tests/fixtures/dev.txt"));
  EXPECT_EQ(out["tokens_scored"], 117019);  // 229 windows x 511, as llama-perplexity
  return out["ppl"].get<double>();
}

// The first ~9,000 characters of dev.txt (whole lines), two windows of 1024 tokens and part
// of a third with each model's tokenizer, in a file of their own.
std::string two_windows_text() {
  static const std::string path = [] {
    std::ifstream in(source_path("tests/fixtures/dev.txt"));
    std::string text, line;
    while (text.size() < 9000 && std::getline(in, line)) text += line + "\n";
    std::string p = temp_path("dev-two-windows.txt");
    std::ofstream(p) << text;
    return p;
  }();
  return path;
}

// The F16 GGUF of a model: shipped in ../shared, else written by `brisk convert`.
std::string f16_gguf(const std::string& name) {
  std::string shipped = shared_path("models/" + name + "/" + name + "-f16.gguf");
  if (!shipped.empty()) return shipped;
  std::string out = temp_path(name + "-f16.gguf");
  CliResult r = run_brisk({"convert", model_dir(name), out, "--type", "f16"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

class Perplexity : public ::testing::TestWithParam<std::string> {};

TEST_P(Perplexity, HfFolderScoresAsTheF16Gguf) {
  std::string dir = model_dir(GetParam());
  if (dir.empty()) GTEST_SKIP() << "../shared/models/" << GetParam() << " not present";
  json hf = run_ppl(dir, two_windows_text()), gguf = run_ppl(f16_gguf(GetParam()), two_windows_text());
  EXPECT_EQ(hf["windows"], 2);
  EXPECT_EQ(hf["tokens_scored"], gguf["tokens_scored"]);
  // A GGUF's Q/K rows may be permuted for its RoPE layout: the same sums in another
  // order, so the two agree to float rounding, not bit for bit (brisk-tiny: 1.6e-8).
  const double a = hf["nll_per_token"].get<double>(), b = gguf["nll_per_token"].get<double>();
  EXPECT_NEAR(a, b, 1e-6 * b);
}

TEST_P(Perplexity, F16GgufMatchesProtocolFigure) {
  std::string dir = model_dir(GetParam());
  if (dir.empty()) GTEST_SKIP() << "../shared/models/" << GetParam() << " not present";
  double want = reference_ppl(dir);
  EXPECT_NEAR(ppl(f16_gguf(GetParam())), want, 0.005 * want);
}

INSTANTIATE_TEST_SUITE_P(Models, Perplexity,
                         ::testing::Values("brisk-nano", "brisk-tiny", "brisk-small"));

// Q8_0 (the bundled file, quantized by llama.cpp) against the F16 figure, which the tests
// above show brisk reproduces within 0.5%.
TEST(PerplexityQ8_0, WithinOnePercentOfF16) {
  std::string dir = shared_path("models/brisk-tiny");
  if (dir.empty()) GTEST_SKIP() << "../shared/models/brisk-tiny not present";
  double f16 = reference_ppl(dir);
  EXPECT_NEAR(ppl(source_path("models/brisk-tiny-q8_0.gguf")), f16, 0.01 * f16);
}

}  // namespace
}  // namespace brisk::test
