// ReFreeKV (arXiv 2502.16886): the budget follows the input instead of a fixed ratio. At
// each prefill pass, per layer: a_g = the attention of the pass's last token over the
// cached positions (KV head g, averaged over its query heads); drop, in every head, the m
// positions it attends to least, with m the largest cut whose loss of attention mass in L2,
// mean_g |a_g restricted to the kept| against mean_g |a_g|, stays within 1% (the paper's
// one universal threshold; the "last_token_attn" metric of its code). Decode steps append
// without evicting.
#include <algorithm>
#include <cmath>

#include "kv/kv_cache.h"
#include "kv/token_eviction.h"

namespace brisk::eviction {
namespace {

constexpr double kThreshold = 0.01;

class RefreePolicy final : public TokenEvictionPolicy {
 public:
  const char* name() const override { return "refree"; }

  int64_t adaptive_budget(const EvictionInput& in) override {
    if (in.n_q < 2) return in.n_slots;  // prefill only
    const int64_t n_kv = in.cache.shape().n_head_kv, n = in.n_slots;
    weights_.assign(static_cast<size_t>(n_kv), {});
    std::vector<std::vector<double>> sorted_sq(static_cast<size_t>(n_kv));
    double baseline = 0;
    for (int64_t g = 0; g < n_kv; ++g) {
      last_query(in, g, weights_[g]);
      std::vector<double>& s = sorted_sq[g];
      s.resize(static_cast<size_t>(n));
      for (int64_t p = 0; p < n; ++p) s[p] = double(weights_[g][p]) * weights_[g][p];
      std::sort(s.begin(), s.end());  // least important first
      double total = 0;
      for (double x : s) total += x;
      baseline += std::sqrt(total) / n_kv;
    }
    // score(m) falls as m grows: walk m up while the loss stays within the threshold.
    std::vector<double> kept(static_cast<size_t>(n_kv));
    for (int64_t g = 0; g < n_kv; ++g)
      for (double x : sorted_sq[g]) kept[g] += x;
    int64_t m = 0;
    while (m + 1 < n) {
      double score = 0;
      for (int64_t g = 0; g < n_kv; ++g) score += std::sqrt(std::max(0.0, kept[g] - sorted_sq[g][m])) / n_kv;
      if ((baseline - score) / baseline > kThreshold) break;
      for (int64_t g = 0; g < n_kv; ++g) kept[g] -= sorted_sq[g][m];
      ++m;
    }
    return n - m;
  }

  void select(const EvictionInput& in, int64_t budget,
              std::vector<std::vector<int64_t>>& keep) override {
    keep.resize(weights_.size());
    for (size_t g = 0; g < weights_.size(); ++g)  // the current token always stays
      keep[g] = top_slots_plus_tail(weights_[g], 0, in.n_slots - 1, budget - 1, in.n_slots);
  }

 private:
  static void last_query(const EvictionInput& in, int64_t g, std::vector<float>& w) {
    EvictionInput last = in;
    last.q = in.q + (in.n_q - 1) * in.n_head * in.cache.shape().head_dim;
    last.n_q = 1;
    last.first_slot = in.first_slot + in.n_q - 1;
    eviction_weights(last, g, w);
  }
  std::vector<std::vector<float>> weights_;
};

}  // namespace

std::unique_ptr<TokenEvictionPolicy> refree() { return std::make_unique<RefreePolicy>(); }

}  // namespace brisk::eviction
