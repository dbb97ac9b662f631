// brisk calibrate -m MODEL -f TEXT --budget B [--keeps 1,0.5,0.25,0.125] [--types f16,int8,int4r]
// [--policy snapkv] [-c CTX] [--windows N] -o PLAN [--json]: a per-layer KV plan for a KV memory
// budget (a share of the f16 full cache), loaded by --kv-evict plan:PLAN (eval/kv_calibrate.h).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine/loaded_model.h"
#include "eval/kv_calibrate.h"
#include "options.h"
#include "util/error.h"

namespace brisk {
namespace {

int cmd_calibrate(int argc, char** argv) {
  CLI::App app{"A per-layer KV plan (codec and kept share per layer) for a KV memory budget"};
  ModelOptions mo;
  app.add_option("-m,--model", mo.model, "GGUF file or Hugging Face folder (default: bundled model)");
  app.add_option("-t,--threads", mo.threads, "threads (default: all cores)");
  app.add_option("-c,--ctx", mo.ctx, "tokens per calibration window (default: the model's, at most 4096)");
  std::string file, out, policy = "snapkv";
  double budget = 0;
  int n_batch = 128;
  int64_t windows = 1;
  std::vector<double> keeps{1, 0.5, 0.25, 0.125};
  std::vector<std::string> type_names{"f16", "int8", "int4r"};
  bool json = false;
  app.add_option("-f,--file", file, "calibration text (UTF-8)")->required();
  app.add_option("--budget", budget, "KV memory budget: a share of the f16 full cache, e.g. 0.25")
      ->required();
  app.add_option("-o,--output", out, "where to write the plan")->required();
  app.add_option("--keeps", keeps, "kept shares to try per layer (default 1,0.5,0.25,0.125)")
      ->delimiter(',');
  app.add_option("--types", type_names, "KV types to try per layer (default f16,int8,int4r)")
      ->delimiter(',');
  app.add_option("--policy", policy, "token eviction of layers that keep less (default snapkv)")
      ->check(CLI::IsMember({"streaming", "h2o", "snapkv", "tova"}));
  app.add_option("--windows", windows, "calibration windows of ctx tokens (default 1)");
  app.add_option("-b,--batch", n_batch, "tokens per forward pass (eviction runs after each)");
  app.add_flag("--json", json, "print the sensitivities and the plan as one JSON object");
  CLI11_PARSE(app, argc, argv);
  mo.apply_threads();
  if (!(budget > 0)) fail("--budget {} must be > 0 (a share of the f16 full KV cache)", budget);
  std::vector<KvType> types;
  for (const std::string& t : type_names) types.push_back(parse_kv_type(t));

  LoadedModel lm = load_for_generation(mo.path());
  Model& model = *lm.model;
  const int64_t ctx = mo.context_for(model.config().n_ctx_train);
  const std::vector<int32_t> ids = lm.tokenizer->encode(read_scoring_text(file), false, false);
  const int32_t bos = lm.tokenizer->add_bos() ? lm.tokenizer->bos() : -1;
  const int64_t n_layer = model.config().n_layer;
  double cheapest = 2;  // fail before the long part when no plan can fit
  for (double k : keeps)
    for (KvType t : types) cheapest = std::min(cheapest, kv_option_cost({t, k}, model.config().head_dim));
  if (cheapest > budget)
    fail("--budget {} is below the cheapest plan's memory {:.4f} (of the f16 cache); give a "
         "larger budget or cheaper --keeps/--types", budget, cheapest);
  const KvCalibration cal = calibrate_kv(
      model, ids, ctx, bos, n_batch, windows, keeps, types, policy,
      [&](int64_t l) { std::fprintf(stderr, "calibrate: layer %lld/%lld\n", static_cast<long long>(l + 1), static_cast<long long>(n_layer)); });
  const KvPlan plan = plan_for_budget(cal, budget, model.config().head_dim);
  const double cost = kv_plan_cost(plan, model.config().head_dim);
  double predicted = 0;
  for (int64_t l = 0; l < n_layer; ++l)
    for (size_t o = 0; o < cal.options.size(); ++o)
      if (cal.options[o] == plan.layers[static_cast<size_t>(l)])
        predicted += cal.kld[static_cast<size_t>(l)][o];

  // The comment records how the plan was made and what each option cost each layer.
  std::string comment = fmt::format(
      "brisk calibrate: {} on {} ({} tokens scored per option, ctx {}), budget {} of the f16 "
      "cache\nmemory {:.4f} of the f16 cache; predicted KLD {:.5f} (sum of layer sensitivities)\n"
      "sensitivity (mean KLD) per layer; options:",
      mo.path(), file, cal.tokens_scored, ctx, budget, cost, predicted);
  for (const KvLayerOption& o : cal.options) comment += fmt::format(" {}@{}", kv_type_name(o.type), o.keep);
  for (int64_t l = 0; l < n_layer; ++l) {
    comment += fmt::format("\n layer {}:", l);
    for (double k : cal.kld[static_cast<size_t>(l)]) comment += fmt::format(" {:.2e}", k);
  }
  std::ofstream f(out, std::ios::binary);
  if (!(f << format_kv_plan(plan, comment))) fail("cannot write the plan to '{}'", out);

  if (json) {
    nlohmann::json opts = nlohmann::json::array(), layers = nlohmann::json::array();
    for (const KvLayerOption& o : cal.options)
      opts.push_back({{"type", kv_type_name(o.type)}, {"keep", o.keep}});
    for (int64_t l = 0; l < n_layer; ++l) {
      const KvLayerOption& o = plan.layers[static_cast<size_t>(l)];
      layers.push_back({{"type", kv_type_name(o.type)}, {"keep", o.keep},
                        {"kld", cal.kld[static_cast<size_t>(l)]}});
    }
    const nlohmann::json j = {{"plan", out}, {"policy", policy}, {"budget", budget},
                              {"memory_vs_f16", cost}, {"predicted_kld", predicted},
                              {"tokens_scored", cal.tokens_scored}, {"options", opts},
                              {"layers", layers}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s", format_kv_plan(plan, comment).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("calibrate", "a per-layer KV plan (codec and kept share per layer) for a memory budget",
              brisk::cmd_calibrate);
