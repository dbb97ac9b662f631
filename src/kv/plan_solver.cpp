#include "kv/plan_solver.h"

#include <cmath>
#include <limits>

#include "util/error.h"

namespace brisk {

std::vector<int> solve_layer_options(const std::vector<std::vector<PlanOptionScore>>& options,
                                     double budget) {
  const size_t n_layer = options.size();
  if (n_layer == 0) fail("KV plan solver: no layers");
  // Costs in grid units (rounded up: the plan stays within the budget).
  std::vector<std::vector<int64_t>> units(n_layer);
  int64_t most = 0, least = 0;
  for (size_t l = 0; l < n_layer; ++l) {
    if (options[l].empty()) fail("KV plan solver: layer {} has no options", l);
    int64_t hi = 0, lo = std::numeric_limits<int64_t>::max();
    for (const PlanOptionScore& o : options[l]) {
      if (!(o.cost >= 0) || !(o.loss >= 0) || !std::isfinite(o.cost) || !std::isfinite(o.loss))
        fail("KV plan solver: layer {} has an option with cost {} and loss {} (both must be "
             "finite and >= 0)", l, o.cost, o.loss);
      units[l].push_back(static_cast<int64_t>(std::ceil(o.cost * kPlanCostGrid - 1e-9)));
      hi = std::max(hi, units[l].back());
      lo = std::min(lo, units[l].back());
    }
    most += hi;
    least += lo;
  }
  const int64_t cap = std::min<int64_t>(
      most, static_cast<int64_t>(std::floor(budget * static_cast<double>(n_layer) * kPlanCostGrid + 1e-9)));
  if (least > cap)
    fail("KV plan solver: budget {} is below the cheapest plan's memory {:.4f} (of the f16 "
         "cache); give a larger budget or cheaper options", budget,
         static_cast<double>(least) / static_cast<double>(n_layer * kPlanCostGrid));

  // best[c]: least total loss of the layers so far at total cost exactly c units.
  const double inf = std::numeric_limits<double>::infinity();
  const size_t width = static_cast<size_t>(cap + 1);
  std::vector<double> best(width, inf), next(width);
  std::vector<std::vector<int>> choice(n_layer, std::vector<int>(width, -1));
  best[0] = 0;
  for (size_t l = 0; l < n_layer; ++l) {
    std::fill(next.begin(), next.end(), inf);
    for (size_t c = 0; c < width; ++c) {
      if (best[c] == inf) continue;
      for (size_t o = 0; o < options[l].size(); ++o) {
        const size_t to = c + static_cast<size_t>(units[l][o]);
        if (to >= width) continue;
        const double loss = best[c] + options[l][o].loss;
        if (loss < next[to]) next[to] = loss, choice[l][to] = static_cast<int>(o);
      }
    }
    best.swap(next);
  }
  size_t at = 0;
  for (size_t c = 1; c < width; ++c)
    if (best[c] < best[at]) at = c;  // strict: the cheaper wins ties
  std::vector<int> pick(n_layer);
  for (size_t l = n_layer; l-- > 0;) {
    pick[l] = choice[l][at];
    at -= static_cast<size_t>(units[l][static_cast<size_t>(pick[l])]);
  }
  return pick;
}

}  // namespace brisk
