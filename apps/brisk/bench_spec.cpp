#include "bench_spec.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/generator.h"
#include "engine/loaded_model.h"
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

struct Row {
  std::vector<double> tps, speedup;
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
  for (const std::string& m : o.methods) {
    SpecOptions so{m, m == "draft" ? o.draft_model : "", o.k};
    if (!so.enabled()) fail("--spec: list the methods to compare with plain decoding, got 'none'");
    sources.push_back(make_draft_source(so, tok));
  }
  std::vector<std::string> prompts;
  for (const std::string& f : o.prompt_files) prompts.push_back(read_file(f));

  int64_t n_ctx = std::min<int64_t>(lm.model->config().n_ctx_train > 0 ? lm.model->config().n_ctx_train : 4096, 4096);
  Generator gen(*lm.model, tok, n_ctx);
  GenerateOptions plain;
  plain.max_tokens = o.n_gen;
  plain.ignore_eos = true;
  plain.sampling.temperature = 0;

  nlohmann::json rows = nlohmann::json::array();
  if (!o.json)
    std::printf("model: %s, draft: %s, k: %d, %d tokens, %d reps, greedy\n"
                "| prompt | n_prompt | method | accept rate | mean accepted len | tok/s (median) | speedup | same output |\n"
                "|---|---:|---|---:|---:|---:|---:|---|\n",
                o.model.c_str(), o.draft_model.empty() ? "-" : o.draft_model.c_str(), o.k, o.n_gen, o.reps);
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
    auto emit = [&](const std::string& method, double rate, double len, double tps, double speedup, bool same) {
      rows.push_back({{"prompt", name}, {"n_prompt", ids.size()}, {"method", method}, {"acceptance_rate", rate},
                      {"mean_accepted_length", len}, {"tps_median", tps}, {"speedup_median", speedup},
                      {"same_output", same}});
      if (!o.json)
        std::printf("| %s | %zu | %s | %.3f | %.2f | %.1f | %.2fx | %s |\n", name.c_str(), ids.size(),
                    method.c_str(), rate, len, tps, speedup, same ? "yes" : "NO");
      std::fflush(stdout);
    };
    emit("none", 0, 1, median(plain_tps), 1, true);
    for (size_t s = 0; s < sources.size(); ++s)
      emit(o.methods[s], r[s].drafted ? double(r[s].accepted) / r[s].drafted : 0,
           r[s].steps ? double(r[s].tokens) / r[s].steps : 0, median(r[s].tps), median(r[s].speedup),
           r[s].same_output);
  }
  if (o.json)
    std::printf("%s\n", nlohmann::json{{"model", o.model}, {"draft", o.draft_model}, {"k", o.k}, {"n_gen", o.n_gen},
                                       {"reps", o.reps}, {"rows", rows}}.dump().c_str());
  return 0;
}

}  // namespace brisk
