// Choosing one option per layer under a global KV memory budget (the solver of a per-layer
// KV plan, kv/kv_plan.h; MoE-nD, arXiv 2604.17695).
//
// Every layer l has options o with a memory cost c[l][o] (a share of the layer's full f16
// cache) and a predicted quality loss s[l][o] (its calibrated sensitivity, additive over
// layers as MoE-nD assumes); pick one option per layer minimizing sum s subject to
// sum c <= budget * n_layers. This is a multiple-choice knapsack. MoE-nD solves it
// greedily (start from the best option everywhere, take the cheapest downgrade in loss per
// byte until the budget holds), which can miss the optimum when a layer's loss is not
// convex in its memory. Our costs lie on a grid of 1/kPlanCostGrid of a layer (every
// codec's bytes x every keep share of the form k/8 does), so dynamic programming over that
// grid is exact and takes milliseconds: we solve it exactly instead.
#pragma once
#include <cstdint>
#include <vector>

namespace brisk {

constexpr int64_t kPlanCostGrid = 1024;

struct PlanOptionScore {
  double cost = 0;  // share of the layer's f16 full cache, >= 0
  double loss = 0;  // predicted quality loss, >= 0
};

// options[l]: layer l's options (at least one). Returns the chosen option index per
// layer; among plans of equal loss the cheaper one. Costs are rounded up to the grid, the
// budget down, so the plan never exceeds it. Throws brisk::Error when even the cheapest
// option of every layer exceeds the budget.
std::vector<int> solve_layer_options(const std::vector<std::vector<PlanOptionScore>>& options,
                                     double budget);

}  // namespace brisk
