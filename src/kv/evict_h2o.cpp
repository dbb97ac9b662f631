// H2O (Zhang et al., "H2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large
// Language Models", arXiv 2306.14048): a key's importance is the attention it has received
// so far, summed over all queries; keep the heavy hitters (half the budget, as the paper)
// and the most recent tokens (the other half). The running sums live here, per layer,
// sequence and KV head, and move with their slots.
#include <algorithm>

#include "kv/kv_cache.h"
#include "kv/token_eviction.h"

namespace brisk::eviction {
namespace {

class H2oPolicy final : public TokenEvictionPolicy {
 public:
  H2oPolicy(int64_t n_layer, int64_t n_seq, int64_t n_head_kv)
      : n_seq_(n_seq), n_head_kv_(n_head_kv),
        acc_(static_cast<size_t>(n_layer * n_seq * n_head_kv)) {}
  const char* name() const override { return "h2o"; }

  // Called on every forward pass (also when nothing is evicted) to accumulate.
  void observe(const EvictionInput& in) override {
    for (int64_t g = 0; g < n_head_kv_; ++g) {
      std::vector<float>& a = acc(in.layer, in.seq, g);
      a.resize(static_cast<size_t>(in.n_slots), 0.0f);
      eviction_weights(in, g, w_);
      for (int64_t i = 0; i < in.n_q; ++i)
        for (int64_t p = 0; p < in.n_slots; ++p) a[p] += w_[i * in.n_slots + p];
    }
  }

  void select(const EvictionInput& in, int64_t budget,
              std::vector<std::vector<int64_t>>& keep) override {
    const int64_t recent = budget / 2, heavy = budget - recent;
    keep.resize(static_cast<size_t>(n_head_kv_));
    for (int64_t g = 0; g < n_head_kv_; ++g) {
      std::vector<float>& a = acc(in.layer, in.seq, g);
      keep[g] = top_slots_plus_tail(a, 0, in.n_slots - recent, heavy, in.n_slots);
      for (size_t i = 0; i < keep[g].size(); ++i) a[i] = a[keep[g][i]];  // i <= keep[g][i]
      a.resize(keep[g].size());
    }
  }

  void on_clear(int64_t seq) override {
    for (size_t l = 0; l < acc_.size() / static_cast<size_t>(n_seq_ * n_head_kv_); ++l)
      for (int64_t g = 0; g < n_head_kv_; ++g) acc(static_cast<int64_t>(l), seq, g).clear();
  }

 private:
  std::vector<float>& acc(int64_t layer, int64_t seq, int64_t g) {
    return acc_[static_cast<size_t>((layer * n_seq_ + seq) * n_head_kv_ + g)];
  }
  int64_t n_seq_, n_head_kv_;
  std::vector<std::vector<float>> acc_;
  std::vector<float> w_;
};

}  // namespace

std::unique_ptr<TokenEvictionPolicy> h2o(int64_t n_layer, int64_t n_seq, int64_t n_head_kv) {
  return std::make_unique<H2oPolicy>(n_layer, n_seq, n_head_kv);
}

}  // namespace brisk::eviction
