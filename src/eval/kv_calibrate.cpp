#include "eval/kv_calibrate.h"

#include "eval/kv_quality.h"
#include "kv/plan_solver.h"
#include "util/error.h"

namespace brisk {

KvCalibration calibrate_kv(Model& model, const std::vector<int32_t>& tokens, int64_t ctx,
                           int32_t bos, int n_batch, int64_t max_windows,
                           const std::vector<double>& keeps, const std::vector<KvType>& types,
                           const std::string& policy,
                           const std::function<void(int64_t)>& on_layer) {
  if (ctx < 4) fail("calibrate: context must be at least 4 tokens, got {}", ctx);
  if (n_batch < 1) fail("calibrate: batch size must be >= 1, got {}", n_batch);
  if (max_windows < 1) fail("calibrate: --windows must be >= 1, got {}", max_windows);
  if (keeps.empty() || types.empty()) fail("calibrate: need at least one keep share and one KV type");
  const int64_t n_windows = std::min<int64_t>(static_cast<int64_t>(tokens.size()) / ctx, max_windows);
  if (n_windows == 0)
    fail("calibrate: the text has {} tokens, fewer than one window of {} (lower --ctx)",
         tokens.size(), ctx);
  const int64_t n_layer = model.config().n_layer, n_vocab = model.config().n_vocab;

  KvCalibration cal;
  cal.policy = policy;
  for (double keep : keeps) {
    if (!(keep > 0 && keep <= 1)) fail("calibrate: keep share {} must be in (0, 1]", keep);
    for (KvType t : types) cal.options.push_back({t, keep});
  }
  const KvPlan exact{policy, std::vector<KvLayerOption>(static_cast<size_t>(n_layer))};
  auto shape_for = [&](const KvPlan& plan) {
    KvCacheShape s = model.cache_shape(1, ctx);
    s.kv_type = KvType::f32;
    s.kv_evict = "plan:(calibration)";
    s.plan = std::make_shared<const KvPlan>(plan);
    return s;
  };
  for (const KvLayerOption& o : cal.options) {  // throws for a type the head_dim does not suit
    KvCacheShape s = shape_for({policy, std::vector<KvLayerOption>(static_cast<size_t>(n_layer), o)});
    s.n_ctx = 1;
    KvCache check(s);
  }

  // The exact run's scored logits of every window, computed once.
  std::vector<std::vector<float>> reference(static_cast<size_t>(n_windows));
  {
    KvCacheShape s = model.cache_shape(1, ctx);
    s.kv_type = KvType::f32;
    s.kv_evict = "none";
    s.plan = nullptr;
    KvCache c(s);
    for (int64_t w = 0; w < n_windows; ++w)
      window_scored_logits(model, c, tokens.data() + w * ctx, ctx, bos, n_batch,
                           reference[static_cast<size_t>(w)]);
  }
  cal.tokens_scored = n_windows * static_cast<int64_t>(reference[0].size()) / n_vocab;
  cal.kld.assign(static_cast<size_t>(n_layer), std::vector<double>(cal.options.size(), 0.0));
  std::vector<float> logits;
  for (int64_t l = 0; l < n_layer; ++l) {
    for (size_t o = 0; o < cal.options.size(); ++o) {
      KvPlan plan = exact;
      plan.layers[static_cast<size_t>(l)] = cal.options[o];
      KvCache c(shape_for(plan));
      double sum = 0;
      for (int64_t w = 0; w < n_windows; ++w) {
        window_scored_logits(model, c, tokens.data() + w * ctx, ctx, bos, n_batch, logits);
        const std::vector<float>& ref = reference[static_cast<size_t>(w)];
        for (size_t k = 0; k * n_vocab < ref.size(); ++k)
          sum += kl_divergence(&ref[k * n_vocab], &logits[k * n_vocab], n_vocab);
      }
      cal.kld[static_cast<size_t>(l)][o] = sum / static_cast<double>(cal.tokens_scored);
    }
    if (on_layer) on_layer(l);
  }
  return cal;
}

KvPlan plan_for_budget(const KvCalibration& cal, double budget, int64_t head_dim) {
  std::vector<std::vector<PlanOptionScore>> scores(cal.kld.size());
  for (size_t l = 0; l < cal.kld.size(); ++l)
    for (size_t o = 0; o < cal.options.size(); ++o)
      scores[l].push_back({kv_option_cost(cal.options[o], head_dim), cal.kld[l][o]});
  const std::vector<int> pick = solve_layer_options(scores, budget);
  KvPlan plan{cal.policy, {}};
  for (int o : pick) plan.layers.push_back(cal.options[static_cast<size_t>(o)]);
  return plan;
}

}  // namespace brisk
