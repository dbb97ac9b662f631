// SnapKV (Li et al., "SnapKV: LLM Knows What You are Looking for Before Generation",
// arXiv 2404.14469): the last queries of the prompt (the observation window) already attend
// to what generation will need. Per KV head: sum the window's attention over the earlier
// keys, smooth it with 1-D average pooling (kernel 7, so neighbours of an important token
// stay: keeps whole phrases), keep the top keys plus the window itself. The window is the
// paper's 32 queries, but at most an eighth of the budget (at least 8): it is kept whole,
// and in a small budget a 32-query window is mostly text before the question, whose votes
// drown the question's (docs/benchmarks.md, passkey on brisk-small). As in the paper,
// a chunked prompt is compressed once, after its last chunk: the window is then the end
// of the prompt (where the question is), not the end of whichever chunk came first. Peak
// memory is the whole prompt; decode steps then keep the budget, each with its one query.
#include <algorithm>

#include "kv/kv_cache.h"
#include "kv/token_eviction.h"

namespace brisk::eviction {
namespace {

constexpr int64_t kMaxWindow = 32, kMinWindow = 8, kPool = 7;

class SnapKvPolicy final : public TokenEvictionPolicy {
 public:
  const char* name() const override { return "snapkv"; }
  bool waits_for_sampling() const override { return true; }
  void select(const EvictionInput& in, int64_t budget,
              std::vector<std::vector<int64_t>>& keep) override {
    // The observation window: the batch's last queries and their own slots.
    const int64_t w = std::min({std::clamp(budget / 8, kMinWindow, kMaxWindow), in.n_q, budget});
    EvictionInput last = in;
    last.q = in.q + (in.n_q - w) * in.n_head * in.cache.shape().head_dim;
    last.n_q = w;
    last.first_slot = in.first_slot + in.n_q - w;
    const int64_t lo_window = in.n_slots - w;
    keep.resize(static_cast<size_t>(in.cache.shape().n_head_kv));
    for (int64_t g = 0; g < in.cache.shape().n_head_kv; ++g) {
      eviction_weights(last, g, w_);
      score_.assign(static_cast<size_t>(in.n_slots), 0.0f);
      for (int64_t i = 0; i < w; ++i)
        for (int64_t p = 0; p < lo_window; ++p) score_[p] += w_[i * in.n_slots + p];
      pooled_.assign(score_.size(), 0.0f);
      for (int64_t p = 0; p < lo_window; ++p) {
        float s = 0;
        int64_t n = 0;
        for (int64_t j = std::max<int64_t>(0, p - kPool / 2); j <= std::min(lo_window - 1, p + kPool / 2); ++j)
          s += score_[j], ++n;
        pooled_[p] = s / static_cast<float>(n);
      }
      keep[g] = top_slots_plus_tail(pooled_, 0, lo_window, budget - w, in.n_slots);
    }
  }

 private:
  std::vector<float> w_, score_, pooled_;
};

}  // namespace

std::unique_ptr<TokenEvictionPolicy> snapkv() { return std::make_unique<SnapKvPolicy>(); }

}  // namespace brisk::eviction
