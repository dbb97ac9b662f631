// `brisk ppl` reproduces transformers' figure under llama-perplexity's protocol (ctx 1024,
// second half of each window scored) on dev.txt: within 0.5% in F16/F32 weights (compute is
// F32), Q8_0 within 1% of F16.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli.h"

namespace brisk::test {
namespace {

using nlohmann::json;

double reference_ppl(const std::string& ref_path) {
  json ref = json::parse(std::ifstream(ref_path));
  return ref["dev_llama_perplexity_protocol_ctx1024"]["ppl"].get<double>();
}

json ppl(const std::string& model) {
  CliResult r = run_brisk({"ppl", "-m", model, "-f", source_path("tests/fixtures/dev.txt"),
                           "-c", "1024", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

TEST(Perplexity, NanoHfFolderMatchesProtocolFigure) {
  std::string dir = source_path("tests/fixtures/brisk-nano");
  json out = ppl(dir);
  EXPECT_EQ(out["tokens_scored"], 117019);  // 229 windows x 511, as llama-perplexity
  EXPECT_NEAR(out["ppl"].get<double>(), reference_ppl(dir + "/reference.json"),
              0.005 * reference_ppl(dir + "/reference.json"));
}

TEST(Perplexity, TinyF16AndQ8_0) {
  std::string dir = shared_path("models/brisk-tiny");
  if (dir.empty()) GTEST_SKIP() << "../shared/models/brisk-tiny not present";
  double want = reference_ppl(dir + "/reference.json");
  double f16 = ppl(dir + "/brisk-tiny-f16.gguf")["ppl"].get<double>();
  EXPECT_NEAR(f16, want, 0.005 * want);
  double q8 = ppl(source_path("models/brisk-tiny-q8_0.gguf"))["ppl"].get<double>();
  EXPECT_NEAR(q8, f16, 0.01 * f16);
}

TEST(Perplexity, SmallHfFolder) {
  std::string dir = shared_path("models/brisk-small");
  if (dir.empty()) GTEST_SKIP() << "../shared/models/brisk-small not present";
  double want = reference_ppl(dir + "/reference.json");
  EXPECT_NEAR(ppl(dir)["ppl"].get<double>(), want, 0.005 * want);
}

}  // namespace
}  // namespace brisk::test
