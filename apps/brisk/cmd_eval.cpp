// brisk eval -m MODEL [--kv-type T] --task ppl|kld|passkey|needle|copy [-f FILE] [-c CTX]
// [--json]: what a KV-cache setting costs in quality and what it saves in memory, as one
// table row (method, KV bytes per token measured, compression vs f16, ppl, Δppl, KLD,
// accuracy, tokens/s). bench/kv_frontier.sh collects rows into docs/results/kv/.
// passkey and needle answer greedily, or with --temp (sampling, seeded per trial from
// --sample-seed) and --spec (speculative decoding, e.g. SMC-SD's task accuracy).
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"
#include "engine/smc_decoder.h"
#include "eval/copy_task.h"
#include "eval/kv_quality.h"
#include "eval/passkey.h"
#include "eval/perplexity.h"
#include "options.h"
#include "util/error.h"

namespace brisk {
namespace {

std::vector<int32_t> read_tokens(const std::string& file, const Tokenizer& tok) {
  if (file.empty()) fail("--task ppl and kld need a text file (-f FILE)");
  return tok.encode(read_scoring_text(file), false, false);
}

// Bytes one position of K/V takes in a cache of this shape (measured from a real cache).
int64_t measured_bytes_per_token(KvCacheShape s) {
  s.n_ctx = 16;
  KvCache c(s);
  return static_cast<int64_t>(c.bytes()) / s.n_ctx;
}

// The share of the f16 full cache the setting keeps by design: bytes x kept share, per
// layer for a plan (null for a token-count budget or refree, whose share depends on the input).
nlohmann::json nominal_memory(const Model& m, int64_t bpt, int64_t bpt_f16) {
  const KvCacheShape s = m.cache_shape(1, 1);
  if (s.plan) return kv_plan_cost(*s.plan, s.head_dim);
  const EvictionSpec e = parse_eviction(s.kv_evict);
  if (e.policy == "refree" || e.budget.tokens > 0) return nullptr;
  return (e.policy == "none" ? 1.0 : e.budget.fraction) * static_cast<double>(bpt) / bpt_f16;
}

int cmd_eval(int argc, char** argv) {
  CLI::App app{"Quality and memory of a KV-cache setting"};
  ModelOptions mo;
  mo.add_to(app);
  std::string task, file, exact_name = "f32";
  int n_batch = 512;
  int64_t windows = 0, trials = 2, keys = 4;
  uint64_t seed = 1;
  std::vector<int64_t> lengths;
  std::vector<double> depths{0.0, 0.25, 0.5, 0.75, 1.0};
  bool json = false;
  app.add_option("--task", task, "ppl, kld, passkey, needle or copy")->required()
      ->check(CLI::IsMember({"ppl", "kld", "passkey", "needle", "copy"}));
  app.add_option("-f,--file", file, "UTF-8 text file (ppl, kld; copy: the text to copy instead "
                 "of random tokens)");
  app.add_option("-b,--batch", n_batch, "tokens per forward pass (ppl, kld)");
  app.add_option("--windows", windows, "evaluate at most this many windows of ctx tokens (0 = all)");
  app.add_option("--exact-type", exact_name, "the reference KV type for kld (default f32)");
  app.add_option("--lengths", lengths, "prompt lengths (passkey, needle; default ctx/4, ctx/2, "
                 "3ctx/4, ctx-16)")->delimiter(',');
  app.add_option("--depths", depths, "key depths in [0, 1] (passkey, needle)")->delimiter(',');
  app.add_option("--trials", trials, "trials per cell (passkey, needle, copy)");
  app.add_option("--keys", keys, "keys hidden per prompt (needle)");
  app.add_option("--seed", seed, "seed of the random keys and sequences");
  app.add_flag("--json", json, "print one JSON object");
  SamplingParams sampling;
  sampling.temperature = 0;
  bool sample_seed_given = false;
  add_sampling_options(app, sampling, sample_seed_given, "--sample-seed");
  SpecOptions spec;
  add_spec_options(app, spec);
  CLI11_PARSE(app, argc, argv);
  sampling.validate();
  spec.validate();
  const bool custom_answer = spec.enabled() || sampling.temperature > 0;
  if (custom_answer && task != "passkey" && task != "needle")
    fail("--temp and --spec apply to the generated answers of --task passkey and needle, not {}", task);
  if (spec.method == "smc" && !(sampling.temperature > 0))
    fail("--spec smc reweights sampled particles: it needs --temp > 0");
  mo.apply_threads();

  LoadedModel lm = load_for_generation(mo.path(), mo.device_kind());
  mo.apply_kv(*lm.model);
  Model& model = *lm.model;
  const Tokenizer& tok = *lm.tokenizer;
  const int64_t ctx = mo.context_for(model.config().n_ctx_train);
  const KvType type = model.kv_type(), exact = parse_kv_type(exact_name);
  const int64_t bpt = measured_bytes_per_token(model.cache_shape(1, 1));
  KvCacheShape f16 = model.cache_shape(1, 1);
  f16.kv_type = KvType::f16, f16.kv_evict = "none", f16.plan = nullptr;
  const int64_t bpt_f16 = measured_bytes_per_token(f16);

  const bool planned = mo.kv_evict.rfind("plan:", 0) == 0;  // the plan names the types
  const std::string method =
      planned ? mo.kv_evict
              : std::string(kv_type_name(type)) + (mo.kv_evict == "none" ? "" : " + " + mo.kv_evict);
  nlohmann::json row = {{"method", method}, {"task", task}, {"ctx", ctx},
                        {"kv_bytes_per_token", bpt},
                        {"compression_vs_f16", static_cast<double>(bpt_f16) / bpt},
                        {"memory_vs_f16", nominal_memory(model, bpt, bpt_f16)},
                        {"ppl", nullptr}, {"dppl_pct", nullptr}, {"kld", nullptr},
                        {"accuracy", nullptr}, {"tokens_per_s", nullptr}};
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const int32_t bos = tok.add_bos() ? tok.bos() : -1;
  if (task == "ppl") {
    std::vector<int32_t> ids = read_tokens(file, tok);
    if (windows > 0) ids.resize(std::min<size_t>(ids.size(), static_cast<size_t>(windows * ctx)));
    const PerplexityResult r = perplexity(model, ids, ctx, bos, n_batch);
    row["ppl"] = r.ppl;
    row["tokens_scored"] = r.tokens_scored;
    row["tokens_per_s"] = r.windows * ctx / elapsed();
  } else if (task == "kld") {
    const std::vector<int32_t> ids = read_tokens(file, tok);
    const KvQualityResult r = kv_quality(model, ids, ctx, bos, n_batch, exact, type, windows);
    row["ppl"] = r.ppl;
    row["ppl_exact"] = r.ppl_exact;
    row["exact_type"] = kv_type_name(exact);
    row["dppl_pct"] = 100.0 * (r.ppl / r.ppl_exact - 1.0);
    row["kld"] = r.kld;
    row["kld_p99"] = r.kld_p99;
    row["top1_agree"] = r.top1_agree;
    row["kept_share"] = r.kept_share;  // measured: what eviction left in the cache
    row["tokens_scored"] = r.tokens_scored;
    row["tokens_per_s"] = r.tokens_per_s;
  } else if (task == "passkey" || task == "needle") {
    if (lengths.empty()) lengths = {ctx / 4, ctx / 2, 3 * ctx / 4, ctx - 16};
    for (int64_t len : lengths)
      if (len + 8 > ctx) fail("--lengths: {} + 8 answer tokens exceed the context of {}", len, ctx);
    // Sampled or speculative answers: trial t samples with seed --sample-seed + t.
    std::unique_ptr<DraftSource> draft = make_draft_source(spec, tok);
    std::unique_ptr<SmcDecoder> smc;
    if (spec.method == "smc") smc = std::make_unique<SmcDecoder>(model, tok, spec.draft_model, spec.particles, spec.k, ctx);
    Generator gen(model, tok, ctx);
    PasskeyAnswerer answer;
    if (custom_answer)
      answer = [&](const std::vector<int32_t>& prompt, int64_t n_new, int64_t trial) {
        GenerateOptions o;
        o.max_tokens = static_cast<int>(n_new);
        o.ignore_eos = true;
        o.sampling = sampling;
        o.sampling.seed = sampling.seed + static_cast<uint64_t>(trial);
        o.draft = draft.get();
        o.spec_k = spec.k;
        return smc ? smc->generate(prompt, o).tokens : gen.generate(prompt, o).tokens;
      };
    const PasskeyResult r =
        passkey_eval(model, tok, lengths, depths, trials, task == "needle" ? keys : 1, seed, answer);
    row["spec"] = spec.method;
    row["temperature"] = sampling.temperature;
    row["sample_seed"] = sampling.seed;
    row["accuracy"] = r.accuracy();
    nlohmann::json cells = nlohmann::json::array();
    int64_t n_tok = 0;
    for (const PasskeyCell& c : r.cells) {
      cells.push_back({{"length", c.length}, {"depth", c.depth}, {"correct", c.correct},
                       {"trials", c.trials}, {"outcomes", c.outcomes}});
      n_tok += c.length * c.trials;
    }
    row["cells"] = cells;
    row["tokens_per_s"] = n_tok / elapsed();
  } else {  // copy
    // 257: past the byte tokens; with -f the copied text is the file's
    const CopyResult r =
        copy_eval(model, ctx, trials, 257, seed, file.empty() ? std::vector<int32_t>{} : read_tokens(file, tok));
    row["accuracy"] = r.accuracy();
    row["tokens_per_s"] = trials * ctx / elapsed();
  }

  if (json) {
    std::printf("%s\n", row.dump().c_str());
    return 0;
  }
  auto num = [&](const char* key, const char* fmt) {
    if (row[key].is_null()) return std::string("-");
    char buf[64];
    std::snprintf(buf, sizeof buf, fmt, row[key].get<double>());
    return std::string(buf);
  };
  std::printf("| method | task | KV bytes/token | vs f16 | ppl | Δppl %% | KLD | accuracy | tokens/s |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  std::printf("| %s | %s | %lld | %.2fx | %s | %s | %s | %s | %s |\n", method.c_str(),
              task.c_str(), static_cast<long long>(bpt), static_cast<double>(bpt_f16) / bpt,
              num("ppl", "%.4f").c_str(), num("dppl_pct", "%+.3f").c_str(),
              num("kld", "%.5f").c_str(), num("accuracy", "%.3f").c_str(),
              num("tokens_per_s", "%.1f").c_str());
  return 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("eval", "quality and memory of a KV-cache setting (ppl, kld, passkey, needle, copy)",
              brisk::cmd_eval);
