// `brisk eval` on the bundled brisk-tiny at a short context: KLD of the exact cache is 0,
// int8 is close and int4 further, bytes per token are the codec's, bad options fail clearly.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli.h"

namespace brisk::test {
namespace {

using nlohmann::json;

json eval_kld(const std::string& type, const std::string& evict = "none") {
  CliResult r = run_brisk({"eval", "--task", "kld", "--kv-type", type, "--kv-evict", evict, "-c",
                           "256", "--windows", "2", "-b", "64", "-f",
                           source_path("tests/fixtures/dev.txt"), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

TEST(EvalCli, KldOrdersTheCodecs) {
  const json f32 = eval_kld("f32"), i8 = eval_kld("int8"), i4 = eval_kld("int4");
  EXPECT_EQ(f32["kld"].get<double>(), 0.0);  // same cache type: identical logits
  EXPECT_EQ(f32["ppl"].get<double>(), f32["ppl_exact"].get<double>());
  EXPECT_EQ(i8["ppl_exact"].get<double>(), f32["ppl_exact"].get<double>());
  EXPECT_GT(i8["kld"].get<double>(), 0.0);
  EXPECT_LT(i8["kld"].get<double>(), 2e-3);
  EXPECT_GT(i4["kld"].get<double>(), 2 * i8["kld"].get<double>());
  // KIVI's per-channel K: same bytes as int4, less than half its KLD here (0.005 vs 0.021)
  const json kivi = eval_kld("kivi4");
  EXPECT_EQ(kivi["kv_bytes_per_token"], i4["kv_bytes_per_token"]);
  EXPECT_LT(2 * kivi["kld"].get<double>(), i4["kld"].get<double>());
  EXPECT_EQ(i8["tokens_scored"], 2 * 127);
  // brisk-tiny: 8 layers x 2 KV heads x head_dim 64; K and V
  EXPECT_EQ(f32["kv_bytes_per_token"], 8 * 2 * 2 * 256);
  EXPECT_EQ(i8["kv_bytes_per_token"], 8 * 2 * 2 * 68);
  EXPECT_EQ(i4["kv_bytes_per_token"], 8 * 2 * 2 * 40);
}

TEST(EvalCli, EvictionKeepsItsShareAndCostsQuality) {
  const json all = eval_kld("f32"), half = eval_kld("f32", "streaming:0.5");
  EXPECT_EQ(all["kept_share"].get<double>(), 1.0);
  EXPECT_EQ(half["kept_share"].get<double>(), 0.5);  // 128 of 256 positions at the window's end
  EXPECT_GT(half["kld"].get<double>(), 0.0);
  EXPECT_EQ(half["method"], "f32 + streaming:0.5");
}

// Passkey answers sampled (--temp, seeded per trial from --sample-seed) and through SMC-SD
// (--spec smc): same prompts for every method (--seed), reproducible outcomes per seed.
TEST(EvalCli, PasskeyAnswersSampledOrBySmc) {
  auto passkey = [](std::vector<std::string> extra) {
    std::vector<std::string> args = {"eval", "--task", "passkey", "--lengths", "64", "--depths", "0.5,1",
                                     "--trials", "3", "-c", "256", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = run_brisk(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json{};
  };
  const std::string nano = source_path("tests/fixtures/brisk-nano");
  const json sampled = passkey({"--temp", "1.5", "--sample-seed", "3"});
  const json smc = passkey({"--temp", "1.5", "--sample-seed", "3", "--spec", "smc", "--draft", nano,
                            "--spec-particles", "2", "--spec-k", "3"});
  for (const json& j : {sampled, smc}) {
    ASSERT_EQ(j["cells"].size(), 2u);
    EXPECT_EQ(j["cells"][0]["trials"], 3);
    EXPECT_EQ(j["cells"][0]["outcomes"].get<std::string>().size(), 3u);
    EXPECT_EQ(j["temperature"], 1.5);
  }
  EXPECT_EQ(sampled["spec"], "none");
  EXPECT_EQ(smc["spec"], "smc");
  EXPECT_EQ(passkey({"--temp", "1.5", "--sample-seed", "3", "--spec", "smc", "--draft", nano,
                     "--spec-particles", "2", "--spec-k", "3"})["cells"], smc["cells"]);
}

TEST(EvalCli, BadOptionsFailWithAReason) {
  CliResult r = run_brisk({"eval", "--task", "kld", "--kv-type", "int3", "-c", "256", "-f",
                           source_path("tests/fixtures/dev.txt")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown KV type 'int3'"), std::string::npos) << r.err;
  r = run_brisk({"eval", "--task", "ppl", "-c", "256"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("need a text file"), std::string::npos) << r.err;
  r = run_brisk({"eval", "--task", "passkey", "--lengths", "64", "--spec", "smc", "--draft",
                 source_path("tests/fixtures/brisk-nano"), "-c", "256"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("needs --temp > 0"), std::string::npos) << r.err;
  r = run_brisk({"eval", "--task", "ppl", "--temp", "0.8", "-c", "256", "-f", source_path("tests/fixtures/dev.txt")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not ppl"), std::string::npos) << r.err;
  r = run_brisk({"run", "--kv-type", "bogus", "-p", "hi", "-n", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("unknown KV type"), std::string::npos) << r.err;
}

TEST(EvalCli, RunWithCompressedKv) {
  CliResult r = run_brisk({"run", "--kv-type", "int4r", "-p", "The old lighthouse", "-n", "8",
                           "--temp", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
}

TEST(CalibrateCli, PlanFitsTheBudgetAndLoadsEverywhere) {
  const std::string plan = temp_path("tiny.plan");
  CliResult r = run_brisk({"calibrate", "-f", source_path("tests/fixtures/dev.txt"), "-c", "128",
                           "-b", "32", "--budget", "0.3", "--keeps", "1,0.25", "--types",
                           "f16,int8", "-o", plan, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_LE(j["memory_vs_f16"].get<double>(), 0.3);
  ASSERT_EQ(j["layers"].size(), 8u);
  for (const json& l : j["layers"]) {
    ASSERT_EQ(l["kld"].size(), 4u);
    // Keeping a quarter costs more than keeping everything, in every layer.
    EXPECT_GT(l["kld"][2].get<double>(), l["kld"][0].get<double>());
  }
  const json row = eval_kld("f32", "plan:" + plan);
  EXPECT_EQ(row["method"], "plan:" + plan);
  EXPECT_NEAR(row["memory_vs_f16"].get<double>(), j["memory_vs_f16"].get<double>(), 1e-12);
  EXPECT_GT(row["kld"].get<double>(), 0.0);
  EXPECT_LT(row["kept_share"].get<double>(), 1.0);
  r = run_brisk({"run", "--kv-evict", "plan:" + plan, "-p", "The old lighthouse", "-n", "4",
                 "--temp", "0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(CalibrateCli, BadPlansAndBudgetsFailWithAReason) {
  const std::string plan = temp_path("bad.plan");
  std::ofstream(plan) << "policy snapkv\nlayers 8\nlayer 0 int8 2\n";
  CliResult r = run_brisk({"run", "--kv-evict", "plan:" + plan, "-p", "hi", "-n", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("line 3: kept share 2 must be in (0, 1]"), std::string::npos) << r.err;
  r = run_brisk({"eval", "--task", "kld", "--kv-type", "int8", "--kv-evict", "plan:" + plan});
  EXPECT_NE(r.exit_code, 0);
  r = run_brisk({"calibrate", "-f", source_path("tests/fixtures/dev.txt"), "-c", "128",
                 "--budget", "0.01", "--keeps", "1", "-o", plan});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("below the cheapest plan"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace brisk::test
