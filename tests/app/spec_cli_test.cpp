// `brisk run --spec`: the reference greedy continuations through every drafter, the
// drafted/accepted counts in --json, and precise errors for bad speculative options.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli.h"

namespace brisk::test {
namespace {

using nlohmann::json;

TEST(SpecCli, GreedyReferenceThroughEveryDrafterWithCounts) {
  const std::string model = source_path("tests/fixtures/brisk-nano");
  std::ifstream f(model + "/reference.json");
  json ref = json::parse(f);
  const json& p = ref["prompts"][0];
  for (std::vector<std::string> spec : {std::vector<std::string>{"--spec", "lookup"},
                                        {"--spec", "racer", "--spec-k", "6"},
                                        {"--spec", "draft", "--draft", source_path("models/brisk-tiny-q8_0.gguf")}}) {
    std::vector<std::string> args = {"run", "-m", model, "-p", p["text"].get<std::string>(), "-n", "32",
                                     "--temp", "0", "--ignore-eos", "--json"};
    args.insert(args.end(), spec.begin(), spec.end());
    CliResult r = run_brisk(args);
    ASSERT_EQ(r.exit_code, 0) << spec[1] << ": " << r.err;
    json out = json::parse(r.out);
    EXPECT_EQ(out["tokens"], p["greedy_ids"]) << spec[1];
    const json& s = out["speculative"];
    EXPECT_EQ(s["method"], spec[1]);
    EXPECT_GT(s["drafted_tokens"].get<int>(), 0) << spec[1];
    EXPECT_GT(s["accepted_tokens"].get<int>(), 0) << spec[1];
    EXPECT_LE(s["accepted_tokens"].get<int>(), s["drafted_tokens"].get<int>());
    // 32 tokens in fewer target passes than tokens: the point of it.
    EXPECT_LT(out["timings"]["generation_steps"].get<int>(), out["timings"]["generation_tokens"].get<int>());
  }
}

TEST(SpecCli, BadOptionsFailWithTheirName) {
  CliResult r = run_brisk({"run", "-p", "x", "-n", "2", "--spec", "medusa"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--spec must be none, lookup, racer, draft or smc"), std::string::npos) << r.err;
  r = run_brisk({"run", "-p", "x", "-n", "2", "--spec", "draft"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--draft MODEL"), std::string::npos) << r.err;
  r = run_brisk({"run", "-p", "x", "-n", "2", "--spec", "lookup", "--spec-k", "0"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--spec-k"), std::string::npos) << r.err;
  r = run_brisk({"run", "-p", "x", "-n", "2", "--spec", "draft", "--draft", "/nonexistent/d.gguf"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/nonexistent/d.gguf"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace brisk::test
