// The measurement tools from the command line: `brisk bench` (pp/tg rows, --json, comma
// lists, --membw, bad input) and `brisk synth --hf-out` (the HF folder is the same model
// as the GGUF: converting it back gives the same logits). Small and fast: the tiny shape
// and the bundled brisk-tiny model with short prompts.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/model.h"
#include "util/thread_pool.h"

extern char** environ;

namespace brisk {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct CliRun {
  int code = -1;
  std::string out, err;
};

const std::string& tmp_dir() {
  static const std::string d = [] {
    fs::path p = fs::temp_directory_path() / ("brisk-bench-test-" + std::to_string(getpid()));
    fs::create_directories(p);
    return p.string();
  }();
  return d;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs build/brisk with args (no shell), stdout and stderr captured.
CliRun run_cli(const std::vector<std::string>& args) {
  static int n = 0;
  std::string base = tmp_dir() + "/run" + std::to_string(n++);
  std::vector<std::string> a = {BRISK_BINARY_DIR "/brisk"};
  a.insert(a.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, (base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, (base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CliRun r;
  pid_t pid;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) == 0) {
    int st = 0;
    waitpid(pid, &st, 0);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  posix_spawn_file_actions_destroy(&fa);
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  return r;
}

const std::string kModel = BRISK_SOURCE_DIR "/models/brisk-tiny-q8_0.gguf";

TEST(BenchCommand, JsonRowsForEveryThreadCountAndTest) {
  CliRun r = run_cli({"bench", "-m", kModel, "-p", "16,32", "-n", "8", "-t", "1,2", "-r", "2", "--json",
                 "--membw-mb", "64", "--membw-reps", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 6u);  // (pp16, pp32, tg8) x (1, 2 threads)
  EXPECT_GT(j["weight_bytes_per_token"].get<double>(), 0);
  EXPECT_LE(j["weight_bytes_per_token"].get<double>(), j["model_bytes"].get<double>());
  ASSERT_EQ(j["membw"].size(), 2u);
  for (const json& row : j["rows"]) {
    EXPECT_EQ(row["samples"].size(), 2u);
    EXPECT_GT(row["tps_median"].get<double>(), 0);
    EXPECT_LE(row["tps_min"].get<double>(), row["tps_median"].get<double>());
    EXPECT_GE(row["tps_max"].get<double>(), row["tps_median"].get<double>());
    if (row["kind"] == "tg") {
      EXPECT_EQ(row["test"], "tg8");
      double share = row["roofline_share"].get<double>();
      EXPECT_GT(share, 0);
      // bytes x t/s / bandwidth, recomputed from the row
      EXPECT_NEAR(share, row["bytes_per_token"].get<double>() * row["tps_median"].get<double>() /
                             (row["membw_gbps"].get<double>() * 1e9), 1e-9);
    }
  }
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["rows"][0]["test"], "pp16");
  EXPECT_EQ(j["rows"][3]["threads"], 2);
}

TEST(BenchCommand, TableWithDepthAndGivenBandwidth) {
  CliRun r = run_cli({"bench", "-m", kModel, "-p", "8", "-n", "4", "-d", "16", "-t", "1", "-r", "1", "--bw", "10"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| pp8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tg4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("given 10.00 GB/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("load average"), std::string::npos) << r.out;
}

// --parallel B: B sequences decode together; t/s counts all their tokens, and the roofline
// charges the weights once a step.
TEST(BenchCommand, ParallelSequencesDecodeTogether) {
  CliRun r = run_cli({"bench", "-m", kModel, "-p", "0", "-n", "4", "-d", "8", "-t", "2", "-r", "2",
                      "--parallel", "1,3", "--bw", "10", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["test"], "tg4");
  EXPECT_EQ(j["rows"][1]["test"], "tg4 x3");
  EXPECT_EQ(j["rows"][1]["parallel"], 3);
  const double w = j["weight_bytes_per_token"].get<double>();
  const double kv1 = j["rows"][0]["bytes_per_token"].get<double>() - w;  // one sequence's K/V a token
  EXPECT_GT(kv1, 0);
  EXPECT_NEAR(j["rows"][1]["bytes_per_token"].get<double>(), w / 3 + kv1, 1e-6 * w);
  for (const json& row : j["rows"]) {
    EXPECT_GT(row["tps_median"].get<double>(), 0);
    EXPECT_NEAR(row["roofline_share"].get<double>(),
                row["bytes_per_token"].get<double>() * row["tps_median"].get<double>() / 10e9, 1e-9);
  }
  for (std::vector<std::string> a : {std::vector<std::string>{"bench", "-m", kModel, "--parallel", "0"},
                                     {"bench", "-m", kModel, "--parallel", "2", "--driver"}}) {
    CliRun bad = run_cli(a);
    EXPECT_NE(bad.code, 0);
    EXPECT_LT(bad.code, 128) << bad.err;
    EXPECT_NE(bad.err.find("--parallel"), std::string::npos) << bad.err;
  }
}

TEST(BenchCommand, Membw) {
  CliRun r = run_cli({"bench", "--membw", "-t", "1", "--membw-mb", "64", "--membw-reps", "3", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  ASSERT_EQ(j["membw"].size(), 1u);
  EXPECT_EQ(j["membw"][0]["gbps"].size(), 3u);
  EXPECT_GT(j["membw"][0]["gbps_median"].get<double>(), 0.1);
}

TEST(BenchCommand, BadInputIsAnErrorNotACrash) {
  for (std::vector<std::string> a : {std::vector<std::string>{"bench", "-m", kModel, "-r", "0"},
                                     {"bench", "-m", kModel, "-p", "-3"},
                                     {"bench", "-m", kModel, "-t", "-1"},
                                     {"bench", "-m", "/nonexistent.gguf"},
                                     {"bench", "-m", kModel, "--device", "tpu"},
                                     {"bench", "-m", kModel, "--device", "cuda", "--kv-fill", "random"}}) {
    CliRun r = run_cli(a);
    EXPECT_NE(r.code, 0) << a[a.size() - 1];
    EXPECT_LT(r.code, 128) << r.err;
    EXPECT_FALSE(r.err.empty());
  }
}

std::vector<float> last_logits(Model& m, const std::vector<int32_t>& ids) {
  KvCache cache(m.cache_shape(1, 64));
  Batch b;
  b.add_sequence(ids, 0, 0);
  std::vector<float> logits;
  m.forward(b, cache, logits);
  // one decode step as well, so positions > 0 go through RoPE in both layouts
  b.clear();
  b.add(ids[0], static_cast<int32_t>(ids.size()), 0, true);
  std::vector<float> step;
  m.forward(b, cache, step);
  logits.insert(logits.end(), step.begin(), step.end());
  return logits;
}

// synth --hf-out writes the same random model in HF layout; brisk convert takes it back
// to GGUF (permuting q/k rows to interleaved again). With --type bf16 the weights are
// bit-identical, so only f32 summation order may differ.
TEST(SynthCommand, HfFolderConvertsBackToTheSameLogits) {
  std::string gguf = tmp_dir() + "/tiny-bf16.gguf", hf = tmp_dir() + "/tiny-hf",
              back = tmp_dir() + "/tiny-back-f32.gguf";
  CliRun s = run_cli({"synth", "--shape", "tiny", "--type", "bf16", "--seed", "5", "--hf-out", hf, gguf});
  ASSERT_EQ(s.code, 0) << s.err;
  ASSERT_TRUE(fs::exists(hf + "/config.json"));
  ASSERT_TRUE(fs::exists(hf + "/model.safetensors"));
  json cfg = json::parse(slurp(hf + "/config.json"));
  EXPECT_EQ(cfg["model_type"], "llama");
  EXPECT_EQ(cfg["num_key_value_heads"], 2);
  CliRun c = run_cli({"convert", hf, back, "--type", "f32"});
  ASSERT_EQ(c.code, 0) << c.err;

  ThreadPool::set_global_threads(2);
  auto a = load_model(gguf), b = load_model(back), h = load_model(hf);
  std::vector<int32_t> ids = {1, 450, 4996, 17354, 1701, 29916, 432, 17204};
  std::vector<float> la = last_logits(*a, ids), lb = last_logits(*b, ids), lh = last_logits(*h, ids);
  ASSERT_EQ(la.size(), lb.size());
  ASSERT_EQ(la.size(), lh.size());
  double max_abs = 0, max_diff_b = 0, max_diff_h = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    max_abs = std::max(max_abs, std::abs(double(la[i])));
    max_diff_b = std::max(max_diff_b, std::abs(double(la[i]) - lb[i]));
    max_diff_h = std::max(max_diff_h, std::abs(double(la[i]) - lh[i]));
  }
  ASSERT_GT(max_abs, 1e-3);  // not a degenerate all-zero output
  // Tolerance: 1e-4 of the largest logit (bf16 x f32 vs f32 x f32 kernels, same values).
  EXPECT_LE(max_diff_b, 1e-4 * max_abs) << "max |logit| " << max_abs;
  EXPECT_LE(max_diff_h, 1e-4 * max_abs) << "max |logit| " << max_abs;
  // Checked: writing the HF q/k rows unpermuted makes both differences ~0.08 (5% of max).
}

}  // namespace
}  // namespace brisk
