// TOVA (Oren et al., "Transformers are Multi-State RNNs", arXiv 2401.06104): when over
// budget, drop the keys the current query attends to least, its attention averaged over
// the heads (here: over the query heads that share each KV head, so each KV head chooses
// its own). In a prefill chunk the "current query" is the chunk's last token.
#include "kv/kv_cache.h"
#include "kv/token_eviction.h"

namespace brisk::eviction {
namespace {

class TovaPolicy final : public TokenEvictionPolicy {
 public:
  const char* name() const override { return "tova"; }
  void select(const EvictionInput& in, int64_t budget,
              std::vector<std::vector<int64_t>>& keep) override {
    EvictionInput last = in;
    last.q = in.q + (in.n_q - 1) * in.n_head * in.cache.shape().head_dim;
    last.n_q = 1;
    last.first_slot = in.first_slot + in.n_q - 1;
    keep.resize(static_cast<size_t>(in.cache.shape().n_head_kv));
    for (int64_t g = 0; g < in.cache.shape().n_head_kv; ++g) {
      eviction_weights(last, g, w_);
      // the current token itself always stays (the next query will want it most often)
      keep[g] = top_slots_plus_tail(w_, 0, in.n_slots - 1, budget - 1, in.n_slots);
    }
  }

 private:
  std::vector<float> w_;
};

}  // namespace

std::unique_ptr<TokenEvictionPolicy> tova() { return std::make_unique<TovaPolicy>(); }

}  // namespace brisk::eviction
