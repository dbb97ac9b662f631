// `brisk calibrate`: a per-layer KV plan (kv/kv_plan.h) for a memory budget, after MoE-nD
// (arXiv 2604.17695): measure each layer's sensitivity to each option on calibration text,
// then choose one option per layer minimizing the summed sensitivity under the budget
// (kv/plan_solver.h).
//
// Sensitivity of layer l to option o: the mean KL divergence of the next-token
// distributions from the exact (f32, keep-all) cache's when layer l alone uses o and every
// other layer stays exact, over the scored half of each window (eval/kv_quality.h). Summing
// them over layers predicts the loss of a plan (MoE-nD's additive model; interactions
// between layers are ignored, which is what makes one pass per (layer, option) enough).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kv/kv_plan.h"
#include "model/model.h"

namespace brisk {

struct KvCalibration {
  std::string policy;                        // eviction of options that keep < 1
  std::vector<KvLayerOption> options;        // the candidates, the same for every layer
  std::vector<std::vector<double>> kld;      // [layer][option]: sensitivity
  int64_t tokens_scored = 0;                 // per (layer, option)
};

// Every (keep, type) pair is an option. tokens: the calibration text; windows of ctx tokens
// from its start, at most max_windows (> 0). on_layer(l) reports progress.
KvCalibration calibrate_kv(Model& model, const std::vector<int32_t>& tokens, int64_t ctx,
                           int32_t bos, int n_batch, int64_t max_windows,
                           const std::vector<double>& keeps, const std::vector<KvType>& types,
                           const std::string& policy,
                           const std::function<void(int64_t)>& on_layer = {});

// The plan of least predicted loss whose memory is at most `budget` of the f16 full cache
// (kv_plan_cost). Throws brisk::Error when no plan fits.
KvPlan plan_for_budget(const KvCalibration& cal, double budget, int64_t head_dim);

}  // namespace brisk
