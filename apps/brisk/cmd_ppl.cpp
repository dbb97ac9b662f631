// brisk ppl -m MODEL -f TEXT [-c CTX]: perplexity with llama-perplexity's protocol.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine/loaded_model.h"
#include "eval/perplexity.h"
#include "options.h"
#include "util/error.h"

namespace brisk {
namespace {

int cmd_ppl(int argc, char** argv) {
  CLI::App app{"Perplexity of a text file (llama-perplexity protocol)"};
  ModelOptions mo;
  mo.add_to(app);
  std::string file;
  int n_batch = 512;
  bool json = false;
  mo.ctx = 1024;  // llama-perplexity's usual -c for comparisons
  app.add_option("-f,--file", file, "UTF-8 text file")->required();
  app.add_option("-b,--batch", n_batch, "tokens per forward pass");
  app.add_flag("--json", json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);

  const std::string text = read_scoring_text(file);
  mo.apply_threads();

  LoadedModel lm = load_for_generation(mo.path(), mo.device_kind());
  mo.apply_kv(*lm.model);
  const Tokenizer& tok = *lm.tokenizer;
  std::vector<int32_t> ids = tok.encode(text, false, false);
  int32_t bos = tok.add_bos() ? tok.bos() : -1;
  PerplexityResult r = perplexity(*lm.model, ids, mo.ctx, bos,
                                  n_batch, [&](int64_t w, int64_t n, double ppl) {
                                    if (!json) std::fprintf(stderr, "\r[%lld/%lld] ppl %.4f",
                                                            (long long)w + 1, (long long)n, ppl);
                                  });
  if (json) {
    nlohmann::json out = {{"ppl", r.ppl},
                          {"nll_per_token", r.nll_per_token},
                          {"tokens_scored", r.tokens_scored},
                          {"windows", r.windows},
                          {"ctx", mo.ctx},
                          {"tokens", ids.size()}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::fprintf(stderr, "\n");
    std::printf("ppl %.4f over %lld tokens (%lld windows of %d; nll/token %.5f)\n", r.ppl,
                (long long)r.tokens_scored, (long long)r.windows, mo.ctx, r.nll_per_token);
  }
  return 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("ppl", "perplexity of a text file (llama-perplexity protocol)", brisk::cmd_ppl);
