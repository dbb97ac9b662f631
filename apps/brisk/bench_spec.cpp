#include "bench_spec.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/generator.h"
#include "engine/loaded_model.h"
#include "engine/smc_decoder.h"
#include "eval/perplexity.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace brisk {

namespace {
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("--spec-prompts: cannot read '{}'", path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Mean negative log-likelihood of `out` after `prompt` under `m` (raw logits, T = 1).
double output_nll(Model& m, const std::vector<int32_t>& prompt, const std::vector<int32_t>& out) {
  if (out.empty()) return 0;
  KvCache cache(m.cache_shape(1, static_cast<int64_t>(prompt.size() + out.size())));
  Batch b;
  for (size_t i = 0; i + 1 < prompt.size(); ++i) b.add(prompt[i], static_cast<int32_t>(i), 0, false);
  b.add(prompt.back(), static_cast<int32_t>(prompt.size() - 1), 0, true);
  for (size_t i = 0; i + 1 < out.size(); ++i) b.add(out[i], static_cast<int32_t>(prompt.size() + i), 0, true);
  std::vector<float> logits;
  m.forward(b, cache, logits);
  const int64_t n = m.config().n_vocab;
  double nll = 0;
  for (size_t i = 0; i < out.size(); ++i) nll -= log_prob(logits.data() + i * n, n, out[i]);
  return nll / static_cast<double>(out.size());
}

struct Row {
  std::vector<double> tps, speedup, nll;
  long drafted = 0, accepted = 0, steps = 0, tokens = 0;
  bool same_output = true;
};
}  // namespace

int run_spec_bench(const SpecBenchOptions& o) {
  if (o.prompt_files.empty()) fail("--spec needs prompt files: --spec-prompts FILE[,FILE...]");
  if (o.n_gen < 1) fail("-n must be >= 1 for --spec, got {}", o.n_gen);
  if (o.reps < 1) fail("-r must be >= 1, got {}", o.reps);
  ThreadPool::set_global_threads(o.threads);
  LoadedModel lm = load_for_generation(o.model);
  const Tokenizer& tok = *lm.tokenizer;
  std::vector<std::unique_ptr<DraftSource>> sources;
  std::vector<std::string> names;
  std::unique_ptr<SmcDecoder> smc;
  int64_t n_ctx = std::min<int64_t>(lm.model->config().n_ctx_train > 0 ? lm.model->config().n_ctx_train : 4096, 4096);
  for (const std::string& m : o.methods) {
    SpecOptions so{m, m == "draft" || m == "smc" ? o.draft_model : "", o.k, o.particles,
                   m == "draft" ? o.draft_vocab : 0};
    so.validate();
    if (!so.enabled()) fail("--spec: list the methods to compare with plain decoding, got 'none'");
    if (m == "smc") {
      smc = std::make_unique<SmcDecoder>(*lm.model, tok, o.draft_model, o.particles, o.k, n_ctx);
      continue;
    }
    sources.push_back(make_draft_source(so, tok));
    names.push_back(m);
  }
  std::vector<std::string> prompts;
  for (const std::string& f : o.prompt_files) prompts.push_back(read_file(f));

  Generator gen(*lm.model, tok, n_ctx);
  GenerateOptions plain;
  plain.max_tokens = o.n_gen;
  plain.ignore_eos = true;
  plain.sampling.temperature = 0;

  nlohmann::json rows = nlohmann::json::array();
  if (!o.json)
    std::printf("model: %s, draft: %s, k: %d, %d tokens, %d reps, greedy (smc: T %.2f, %d particles)\n"
                "| prompt | n_prompt | method | accept rate | mean accepted len | tok/s (median) | speedup | same output | output ppl |\n"
                "|---|---:|---|---:|---:|---:|---:|---|---:|\n",
                o.model.c_str(), o.draft_model.empty() ? "-" : o.draft_model.c_str(), o.k, o.n_gen, o.reps,
                o.temperature, o.particles);
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    std::vector<int32_t> ids = tok.encode(prompts[pi], tok.add_bos(), true);
    if (static_cast<int64_t>(ids.size()) + o.n_gen >= n_ctx)
      fail("--spec-prompts: '{}' has {} tokens; with -n {} that exceeds the context of {}",
           o.prompt_files[pi], ids.size(), o.n_gen, n_ctx);
    gen.generate(ids, plain);  // warm-up (and the prompt's K/V, reused by every run below)
    std::vector<double> plain_tps;
    std::vector<Row> r(sources.size());
    for (int rep = 0; rep < o.reps; ++rep) {
      GenerateResult base = gen.generate(ids, plain);
      plain_tps.push_back(base.timings.decode_tps());
      for (size_t s = 0; s < sources.size(); ++s) {
        GenerateOptions so = plain;
        so.draft = sources[s].get();
        so.spec_k = o.k;
        GenerateResult x = gen.generate(ids, so);
        r[s].tps.push_back(x.timings.decode_tps());
        r[s].speedup.push_back(x.timings.decode_tps() / base.timings.decode_tps());
        r[s].drafted += x.timings.drafted, r[s].accepted += x.timings.accepted;
        r[s].steps += x.timings.decode_steps, r[s].tokens += x.timings.decode_tokens;
        r[s].same_output = r[s].same_output && x.tokens == base.tokens;
      }
    }
    const std::string name = std::filesystem::path(o.prompt_files[pi]).stem().string();
    auto emit = [&](const std::string& method, double rate, double len, double tps, double speedup,
                    const char* same, double nll) {
      nlohmann::json row = {{"prompt", name}, {"n_prompt", ids.size()}, {"method", method}, {"acceptance_rate", rate},
                            {"mean_accepted_length", len}, {"tps_median", tps}, {"speedup_median", speedup},
                            {"same_output", same}};
      if (nll > 0) row["output_ppl"] = std::exp(nll);
      rows.push_back(row);
      if (!o.json)
        std::printf("| %s | %zu | %s | %.3f | %.2f | %.1f | %.2fx | %s | %s |\n", name.c_str(), ids.size(),
                    method.c_str(), rate, len, tps, speedup, same,
                    nll > 0 ? fmt::format("{:.2f}", std::exp(nll)).c_str() : "-");
      std::fflush(stdout);
    };
    emit("none", 0, 1, median(plain_tps), 1, "yes", 0);
    for (size_t s = 0; s < sources.size(); ++s)
      emit(names[s], r[s].drafted ? double(r[s].accepted) / r[s].drafted : 0,
           r[s].steps ? double(r[s].tokens) / r[s].steps : 0, median(r[s].tps), median(r[s].speedup),
           r[s].same_output ? "yes" : "NO", 0);
    if (smc) {  // sampled: plain sampling vs SMC-SD, same settings and seeds
      GenerateOptions sampled = plain;
      sampled.sampling.temperature = o.temperature;
      Row base, x;
      for (int rep = 0; rep < o.reps; ++rep) {
        sampled.sampling.seed = static_cast<uint64_t>(rep + 1);
        GenerateResult a = gen.generate(ids, sampled);
        GenerateResult b = smc->generate(ids, sampled);
        base.tps.push_back(a.timings.decode_tps());
        x.tps.push_back(b.timings.decode_tps());
        x.speedup.push_back(b.timings.decode_tps() / a.timings.decode_tps());
        base.nll.push_back(output_nll(*lm.model, ids, a.tokens));
        x.nll.push_back(output_nll(*lm.model, ids, b.tokens));
        x.steps += b.timings.decode_steps, x.tokens += b.timings.decode_tokens;
      }
      auto mean = [](const std::vector<double>& v) {
        double s = 0;
        for (double d : v) s += d;
        return v.empty() ? 0 : s / static_cast<double>(v.size());
      };
      emit("sampled", 0, 1, median(base.tps), 1, "-", mean(base.nll));
      emit("smc", 0, x.steps ? double(x.tokens) / x.steps : 0, median(x.tps), median(x.speedup), "-", mean(x.nll));
    }
  }
  if (o.json)
    std::printf("%s\n", nlohmann::json{{"model", o.model}, {"draft", o.draft_model}, {"k", o.k}, {"n_gen", o.n_gen},
                                       {"reps", o.reps}, {"rows", rows}}.dump().c_str());
  return 0;
}

}  // namespace brisk
