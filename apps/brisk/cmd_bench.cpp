// brisk bench: prompt-processing and generation speed, like llama-bench.
//   pp<P>: one forward pass of P tokens after D tokens already in the cache (-d), timed.
//   tg<N>: N forward passes of one token each after D cached tokens, each fed the greedy
//          argmax of the previous step's logits (the argmax, a scan of n_vocab floats, is
//          inside the timed loop; it is ~0.1% of a step at 1B scale).
//          --parallel B: B sequences decode together, one token each a step (a batch of
//          B; the serving engine's steady state, like llama-batched-bench); t/s counts
//          all B sequences' tokens.
// Only Model::forward (and that argmax) is timed: no tokenizer, no sampler, no allocation
// of the cache. Each test runs once untimed (warm-up), then -r times; rows report the
// median, min, max and standard deviation of tokens/s.
// Every tg row also gives its share of the bandwidth roofline: the bytes one decode step
// must read (every weight matrix incl. the output head, one embedding row, the norms, and
// the K/V of the positions attended to, averaged over the N steps) x tokens/s, divided by
// the read bandwidth `--membw` measures with the same thread count.
// --device cuda: the same tests on the CUDA model (the JSON names the device); the roofline
// then needs --bw (the GPU's copy bandwidth), the CPU bandwidth is not measured, and the K/V
// bytes are those the GPU stores (f32 is kept as f16 there).
// --driver (for bench/peer-llamacpp): loads and warms up once, then runs one repetition per
// stdin line ("pp" or "tg") and prints one JSON line each, so another engine can alternate.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_membw.h"
#include "bench_spec.h"
#include "command.h"
#include "kernels/dispatch.h"
#include "model/cuda/cuda_model.h"
#include "model/model.h"
#include "options.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace brisk {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

struct Stats {
  double median = 0, min = 0, max = 0, mean = 0, sd = 0;
};
Stats stats_of(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  for (double x : v) s.mean += x;
  s.mean /= n;
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = n > 1 ? std::sqrt(s.sd / (n - 1)) : 0;
  return s;
}

// Bytes one decode step reads from the weights: every tensor in full except the token
// embedding, of which one row is gathered (in full when it doubles as the output head).
struct WeightBytes {
  double per_token = 0;  // bytes
  double file = 0;       // all tensors
};
WeightBytes weight_bytes(const Model& m) {
  WeightBytes w;
  const ModelSource& src = m.source();
  const bool tied = src.find("output.weight") == nullptr;
  for (const TensorView& t : src.tensors) {
    w.file += static_cast<double>(t.nbytes());
    if (t.name == "token_embd.weight" && !tied) w.per_token += static_cast<double>(t.row_size());
    else w.per_token += static_cast<double>(t.nbytes());
  }
  return w;
}

// The engine's greedy pick (kernels/dispatch.h), so a tg row costs what a greedy step does.
int32_t argmax(const float* x, int64_t n) { return kernel_table().argmax(x, n); }

class Runner {
 public:
  // random_fill: set_depth() writes random K/V rows instead of running the model (a decode
  // step's cost does not depend on the values it reads; minutes saved at deep contexts).
  Runner(Model& m, int64_t n_ctx, bool random_fill = false, int64_t n_seq = 1)
      : m_(m), cache_(m.cache_shape(n_seq, n_ctx)), random_fill_(random_fill) {
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(m.config().n_vocab) - 1);
    ids_.resize(n_ctx);
    for (auto& t : ids_) t = d(rng);
  }
  int64_t capacity() const { return cache_.capacity(); }

  // Makes the cache hold exactly `depth` positions in sequences 0..n_seq-1 (untimed).
  void set_depth(int64_t depth, int32_t n_seq = 1) {
    for (int32_t s = 0; s < n_seq; ++s) {
      if (cache_.length(s) > depth) cache_.truncate(s, depth);
      if (random_fill_ && cache_.length(s) < depth) {
        std::mt19937 rng(99 + s);
        std::normal_distribution<float> g(0.0f, 1.0f);
        std::vector<float> k(static_cast<size_t>(cache_.row_size())), v(k.size());
        for (int64_t p = cache_.length(s); p < depth; ++p)
          for (int64_t l = 0; l < cache_.shape().n_layer; ++l) {
            for (auto& x : k) x = g(rng);
            for (auto& x : v) x = g(rng);
            cache_.store(l, s, p, k.data(), v.data());
          }
        cache_.set_length(s, depth);
      }
      Batch b;
      for (int64_t start = cache_.length(s); start < depth; start += 512) {
        b.clear();
        int64_t end = std::min<int64_t>(depth, start + 512);
        for (int64_t p = start; p < end; ++p) b.add(ids_[p], static_cast<int32_t>(p), s, p + 1 == end);
        m_.forward(b, cache_, logits_);
      }
    }
  }
  double pp(int64_t n_prompt, int64_t depth) {  // tokens/s
    set_depth(depth);
    Batch b;
    for (int64_t i = 0; i < n_prompt; ++i)
      b.add(ids_[depth + i], static_cast<int32_t>(depth + i), 0, i + 1 == n_prompt);
    auto t0 = Clock::now();
    m_.forward(b, cache_, logits_);
    return n_prompt / seconds_since(t0);
  }
  double tg(int64_t n_gen, int64_t depth, int32_t n_seq = 1) {  // tokens/s of all n_seq sequences
    set_depth(depth, n_seq);
    Batch b;
    std::vector<int32_t> tok(static_cast<size_t>(n_seq), ids_[depth]);
    const int64_t n_vocab = m_.config().n_vocab;
    auto t0 = Clock::now();
    for (int64_t i = 0; i < n_gen; ++i) {
      b.clear();
      for (int32_t s = 0; s < n_seq; ++s) b.add(tok[s], static_cast<int32_t>(depth + i), s, true);
      m_.forward(b, cache_, logits_);
      for (int32_t s = 0; s < n_seq; ++s) tok[s] = argmax(logits_.data() + s * n_vocab, n_vocab);
    }
    return static_cast<double>(n_seq) * n_gen / seconds_since(t0);
  }
  // Bytes of K/V read per decode step, averaged over steps at positions depth..depth+n-1
  // (the step at position p attends to p+1 positions).
  double kv_bytes_per_token(int64_t n_gen, int64_t depth) const {
    const CudaModelInfo* gpu = cuda_model_info(m_);  // the GPU's own cache (f32 kept as f16)
    const double per_pos = static_cast<double>(gpu ? gpu->kv_bytes_per_position : cache_.bytes_per_token());
    return per_pos * (depth + (n_gen + 1) / 2.0);
  }

 private:
  Model& m_;
  KvCache cache_;
  bool random_fill_ = false;
  std::vector<int32_t> ids_;
  std::vector<float> logits_;
};

int cmd_bench(int argc, char** argv) {
  CLI::App app{"Measure prompt processing (pp) and generation (tg) speed, like llama-bench"};
  std::string model_path;
  std::vector<int> n_prompt{512}, n_gen{128}, threads{0}, depths{0}, parallel{1};
  int reps = 5, membw_reps = 5;
  double membw_mb = 1024, bw_given = 0;
  bool json = false, membw_only = false, driver = false;
  app.add_option("-m,--model", model_path, "GGUF file or Hugging Face folder (default: bundled model)");
  std::string device = "cpu";
  app.add_option("--device", device, "cpu or cuda (default cpu)");
  std::string kv_type = "f32", kv_evict = "none";
  add_kv_options(app, kv_type, kv_evict);
  std::string kv_fill = "model";
  app.add_option("--kv-fill", kv_fill, "how -d's cached tokens are made: model (forward passes) "
                 "or random (random K/V rows, for decode timing at deep contexts)")
      ->check(CLI::IsMember({"model", "random"}));
  app.add_option("-p,--n-prompt", n_prompt, "prompt lengths, comma list (0 = no pp test)")->delimiter(',');
  app.add_option("-n,--n-gen", n_gen, "generation lengths, comma list (0 = no tg test)")->delimiter(',');
  app.add_option("-t,--threads", threads, "thread counts, comma list (0 = all cores)")->delimiter(',');
  app.add_option("-d,--n-depth", depths, "tokens already in the cache, comma list")->delimiter(',');
  app.add_option("--parallel", parallel, "tg: sequences decoding together, one token each a step, comma list "
                 "(default 1)")->delimiter(',');
  app.add_option("-r,--repetitions", reps, "timed repetitions per test (default 5)");
  app.add_flag("--json", json, "print one JSON object");
  app.add_flag("--membw", membw_only, "only measure the memory read bandwidth");
  app.add_option("--membw-mb", membw_mb, "bandwidth buffer size in MiB (default 1024)");
  app.add_option("--membw-reps", membw_reps, "bandwidth repetitions (default 5)");
  app.add_option("--bw", bw_given, "use this bandwidth (GB/s) for the roofline instead of measuring");
  app.add_flag("--driver", driver, "one repetition per stdin line 'pp'/'tg' (for bench/peer-llamacpp)");
  SpecBenchOptions spec;
  app.add_option("--spec", spec.methods, "speculative decoding vs plain: methods, comma list (lookup,racer,draft,smc)")
      ->delimiter(',');
  app.add_option("--draft", spec.draft_model, "draft model for --spec draft");
  app.add_option("--spec-k", spec.k, "most tokens drafted per step (default 4)");
  app.add_option("--draft-vocab", spec.draft_vocab, kDraftVocabHelp);
  app.add_option("--spec-prompts", spec.prompt_files, "prompt files for --spec, comma list")->delimiter(',');
  app.add_option("--spec-particles", spec.particles, "SMC-SD particles for --spec smc (default 4)");
  app.add_option("--spec-temp", spec.temperature, "temperature of --spec smc and its plain baseline (default 0.8)");
  CLI11_PARSE(app, argc, argv);

  if (reps < 1) fail("-r must be >= 1, got {}", reps);
  const Device dev = parse_device(device);
  const bool on_gpu = dev == Device::Cuda;
  if (on_gpu && kv_fill == "random")
    fail("--kv-fill random writes the CPU cache, which the CUDA model does not read; use --kv-fill model "
         "with --device cuda");
  if (on_gpu && (driver || membw_only || !spec.methods.empty()))
    fail("--device cuda: --driver, --membw and --spec run on the CPU only");
  if (membw_mb < 1) fail("--membw-mb must be >= 1, got {}", membw_mb);
  for (int& t : threads) {
    if (t < 0) fail("-t: thread counts must be >= 0, got {}", t);
    if (t == 0) t = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  for (int v : n_prompt) if (v < 0) fail("-p: prompt lengths must be >= 0, got {}", v);
  for (int v : n_gen) if (v < 0) fail("-n: generation lengths must be >= 0, got {}", v);
  for (int v : depths) if (v < 0) fail("-d: depths must be >= 0, got {}", v);
  for (int v : parallel) if (v < 1 || v > 256) fail("--parallel: sequence counts must be in 1..256, got {}", v);
  if ((driver || !spec.methods.empty()) && parallel != std::vector<int>{1})
    fail("--parallel applies to the plain pp/tg tests only");
  if (!spec.methods.empty()) {
    spec.model = model_path.empty() ? default_model_path() : model_path;
    spec.n_gen = n_gen.front(), spec.reps = reps, spec.threads = threads.front(), spec.json = json;
    return run_spec_bench(spec);
  }

  // Bandwidth per thread count, measured once per run.
  std::map<int, MembwResult> bw;
  auto bandwidth = [&](int t) -> double {
    if (bw_given > 0) return bw_given;
    auto it = bw.find(t);
    if (it == bw.end())
      it = bw.emplace(t, measure_membw(t, static_cast<size_t>(membw_mb * 1048576), membw_reps)).first;
    return it->second.median;
  };
  auto bw_json = [&] {
    nlohmann::json a = nlohmann::json::array();
    for (auto& [t, r] : bw)
      a.push_back({{"threads", t}, {"bytes", r.bytes}, {"isa", r.isa}, {"gbps_median", r.median},
                   {"gbps_min", r.min}, {"gbps_max", r.max}, {"gbps", r.gbps}});
    return a;
  };

  if (membw_only) {
    for (int t : threads) bandwidth(t);
    if (json) {
      std::printf("%s\n", nlohmann::json{{"membw", bw_json()}, {"load", loadavg()}}.dump().c_str());
    } else {
      for (auto& [t, r] : bw)
        std::printf("membw: %d threads, %.0f MiB, %s loads: %.2f GB/s median (min %.2f, max %.2f, %zu reps)\n",
                    t, r.bytes / 1048576.0, r.isa, r.median, r.min, r.max, r.gbps.size());
      std::printf("load average: %s\n", loadavg().c_str());
    }
    return 0;
  }

  const std::string path = model_path.empty() ? default_model_path() : model_path;
  std::unique_ptr<Model> model = make_model_on(load_model_source(path), dev);
  model->set_kv_type(parse_kv_type(kv_type));
  model->set_kv_evict(kv_evict);
  const ModelConfig& cfg = model->config();
  const WeightBytes wb = weight_bytes(*model);
  int64_t n_ctx = 1;
  for (int d : depths)
    for (int p : n_prompt) n_ctx = std::max<int64_t>(n_ctx, d + p + 1);
  for (int d : depths)
    for (int n : n_gen) n_ctx = std::max<int64_t>(n_ctx, d + n + 1);
  Runner runner(*model, n_ctx, kv_fill == "random", *std::max_element(parallel.begin(), parallel.end()));

  if (driver) {
    const int t = threads.front(), p = n_prompt.front(), n = n_gen.front(), d = depths.front();
    double bwv = bandwidth(t);
    ThreadPool::set_global_threads(t);
    if (p > 0) runner.pp(p, d);  // warm-up
    if (n > 0) runner.tg(n, d);
    double tg_bytes = wb.per_token + runner.kv_bytes_per_token(n, d);
    // What an f16 cache (llama.cpp's default) reads per step, for the peer's roofline share.
    const double f16_kv = 2.0 * 2 * cfg.n_layer * cfg.n_head_kv * cfg.head_dim * (d + (n + 1) / 2.0);
    std::printf("%s\n", nlohmann::json{{"ready", true}, {"membw_gbps", bwv}, {"threads", t}, {"n_vocab", cfg.n_vocab},
                                       {"weight_bytes_per_token", wb.per_token},
                                       {"tg_bytes_per_token", tg_bytes}, {"kv_type", kv_type_name(model->kv_type())},
                                       {"kv_f16_bytes_per_token", f16_kv}}
                            .dump().c_str());
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
      nlohmann::json out;
      if (line == "pp" && p > 0) out = {{"test", "pp"}, {"tps", runner.pp(p, d)}};
      else if (line == "tg" && n > 0) out = {{"test", "tg"}, {"tps", runner.tg(n, d)}};
      else if (line == "quit") break;
      else out = {{"error", "expected 'pp', 'tg' or 'quit', got '" + line + "'"}};
      std::printf("%s\n", out.dump().c_str());
      std::fflush(stdout);
    }
    return 0;
  }

  nlohmann::json rows = nlohmann::json::array();
  if (!json)
    std::printf("model: %s (%s, %lld layers, %.2f GB, %.1f MB read per token from weights, device %s)\n"
                "| %-8s | %7s | %5s | %11s | %19s | %8s |\n|%s|\n",
                path.c_str(), cfg.arch_name.c_str(), (long long)cfg.n_layer, wb.file / 1e9,
                wb.per_token / 1e6, on_gpu ? "cuda" : "cpu", "test", "threads", "depth", "t/s median", "t/s min..max (sd)",
                "roofline", "----------|---------|-------|-------------|---------------------|----------");
  for (int t : threads) {
    // (on the GPU only a given --bw: the CPU's bandwidth says nothing about it)
    double bwv = !on_gpu && std::any_of(n_gen.begin(), n_gen.end(), [](int n) { return n > 0; }) ? bandwidth(t)
                 : on_gpu ? bw_given : 0;
    ThreadPool::set_global_threads(t);
    for (int d : depths) {
      auto run_test = [&](const char* kind, int len, int n_seq) {
        const bool is_pp = kind[0] == 'p';
        auto once = [&] { return is_pp ? runner.pp(len, d) : runner.tg(len, d, n_seq); };
        once();  // warm-up
        std::vector<double> v;
        for (int i = 0; i < reps; ++i) v.push_back(once());
        Stats s = stats_of(v);
        std::string name = std::string(kind) + std::to_string(len) + (n_seq > 1 ? " x" + std::to_string(n_seq) : "");
        nlohmann::json row = {{"test", name}, {"kind", is_pp ? "pp" : "tg"}, {"n_prompt", is_pp ? len : 0},
                              {"n_gen", is_pp ? 0 : len}, {"parallel", n_seq}, {"depth", d}, {"threads", t},
                              {"reps", reps}, {"tps_median", s.median}, {"tps_min", s.min},
                              {"tps_max", s.max}, {"tps_mean", s.mean}, {"tps_sd", s.sd},
                              {"samples", v}, {"load", loadavg()}};
        double share = 0;
        if (!is_pp) {
          // A step reads the weights once for its n_seq tokens, and each sequence's K/V.
          double bytes = wb.per_token / n_seq + runner.kv_bytes_per_token(len, d);
          row["bytes_per_token"] = bytes;
          if (bwv > 0) {
            share = bytes * s.median / (bwv * 1e9);
            row["membw_gbps"] = bwv;
            row["roofline_share"] = share;
          }
        }
        rows.push_back(row);
        if (!json) {
          char rl[32] = "-";
          if (!is_pp && bwv > 0) std::snprintf(rl, sizeof rl, "%.1f%%", share * 100);
          char spread[64];
          std::snprintf(spread, sizeof spread, "%.2f..%.2f (%.2f)", s.min, s.max, s.sd);
          std::printf("| %-8s | %7d | %5d | %11.2f | %-19s | %8s |\n", name.c_str(), t, d, s.median, spread, rl);
          std::fflush(stdout);
        }
      };
      for (int p : n_prompt)
        if (p > 0) run_test("pp", p, 1);
      for (int n : n_gen)
        for (int b : parallel)
          if (n > 0) run_test("tg", n, b);
    }
  }
  if (json) {
    nlohmann::json out = {{"model", path},
                          {"device", on_gpu ? "cuda" : "cpu"},
                          {"arch", cfg.arch_name},
                          {"n_layer", cfg.n_layer},
                          {"n_embd", cfg.n_embd},
                          {"n_vocab", cfg.n_vocab},
                          {"model_bytes", wb.file},
                          {"weight_bytes_per_token", wb.per_token},
                          {"kv_type", kv_type_name(model->kv_type())},
                          {"kv_evict", kv_evict},
                          {"kv_fill", kv_fill},
                          {"membw", bw_json()},
                          {"rows", rows}};
    if (bw_given > 0) out["membw_given_gbps"] = bw_given;
    std::printf("%s\n", out.dump().c_str());
  } else {
    for (auto& [t, r] : bw)
      std::printf("membw: %d threads: %.2f GB/s median (%s loads, %.0f MiB, %zu reps)\n", t, r.median, r.isa,
                  r.bytes / 1048576.0, r.gbps.size());
    if (bw_given > 0) std::printf("membw: given %.2f GB/s\n", bw_given);
    std::printf("tg: greedy argmax of the logits inside the timed loop; roofline = (weights + K/V bytes per "
                "step) x t/s / membw at the same threads\nload average: %s\n", loadavg().c_str());
  }
  return 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("bench", "measure prompt and generation speed (llama-bench style) and memory bandwidth",
              brisk::cmd_bench);
