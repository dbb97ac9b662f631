// brisk run: one prompt in, streamed text out (or one JSON object with --json).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "command.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"
#include "engine/smc_decoder.h"
#include "options.h"
#include "util/error.h"
#include "util/process_memory.h"
#include "util/utf8.h"

namespace brisk {
namespace {

int cmd_run(int argc, char** argv) {
  CLI::App app{"Generate a continuation of a prompt"};
  ModelOptions mo;
  mo.add_to(app);
  std::string prompt, prompt_file;
  GenerateOptions go;
  bool seed_given = false, json = false;
  app.add_option("-p,--prompt", prompt, "prompt text");
  app.add_option("-f,--file", prompt_file, "read the prompt from a file");
  app.add_option("-n,--n-predict", go.max_tokens, "tokens to generate (default 128)");
  app.add_option("-b,--batch", go.n_batch, "prompt tokens per forward pass");
  app.add_flag("--ignore-eos", go.ignore_eos, "do not stop at an end-of-generation token");
  app.add_flag("--json", json, "print one JSON object instead of streaming text");
  add_sampling_options(app, go.sampling, seed_given);
  SpecOptions spec;
  add_spec_options(app, spec);
  CLI11_PARSE(app, argc, argv);

  if (go.max_tokens < 0) fail("-n must be >= 0, got {}", go.max_tokens);
  if (!prompt_file.empty()) {
    std::ifstream f(prompt_file, std::ios::binary);
    if (!f) fail("cannot read prompt file '{}'", prompt_file);
    std::stringstream s;
    s << f.rdbuf();
    prompt = s.str();
  }
  require_utf8(prompt, "the prompt");
  if (!seed_given) go.sampling.seed = random_seed();
  go.sampling.validate();
  spec.validate();
  mo.apply_threads();

  LoadedModel lm = load_for_generation(mo.path(), mo.device_kind());
  mo.apply_kv(*lm.model);
  std::vector<int32_t> ids = lm.tokenizer->encode(prompt, lm.tokenizer->add_bos(), true);
  std::unique_ptr<DraftSource> draft = make_draft_source(spec, *lm.tokenizer);
  go.draft = draft.get();
  go.spec_k = spec.k;
  const int64_t n_ctx = mo.context_for(lm.model->config().n_ctx_train);
  auto print = [&](const std::string& piece) {
    if (!json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
  };
  GenerateResult r;
  if (spec.method == "smc") {  // approximate: the winning particle is printed at the end
    SmcDecoder smc(*lm.model, *lm.tokenizer, spec.draft_model, spec.particles, spec.k, n_ctx);
    r = smc.generate(ids, go);
    print(r.text);
  } else {
    Generator gen(*lm.model, *lm.tokenizer, n_ctx);
    r = gen.generate(ids, go, print);
  }
  if (!json) {
    std::printf("\n");
    return 0;
  }
  const Timings& t = r.timings;
  const ProcessMemory mem = process_memory();
  nlohmann::json out = {
      {"text", r.text},
      {"tokens", r.tokens},
      {"prompt_tokens", ids.size()},
      {"finish_reason", r.finish_reason},
      {"seed", go.sampling.seed},
      {"timings",
       {{"prompt_ms", t.prompt_ms},
        {"prompt_tokens_per_second", t.prompt_tps()},
        {"generation_ms", t.decode_ms},
        {"generation_steps", t.decode_steps},
        {"generation_tokens", t.decode_tokens},
        {"generation_tokens_per_second", t.decode_tps()}}},
      {"speculative",
       {{"method", spec.method},
        {"k", spec.k},
        {"drafted_tokens", t.drafted},
        {"accepted_tokens", t.accepted},
        {"acceptance_rate", t.drafted > 0 ? double(t.accepted) / t.drafted : 0.0}}},
      {"memory",
       {{"peak_rss_kb", mem.peak_rss_kb},
        {"rss_anon_kb", mem.rss_anon_kb},
        {"rss_file_kb", mem.rss_file_kb}}}};
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("run", "generate text from a prompt", brisk::cmd_run);
