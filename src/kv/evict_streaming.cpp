// StreamingLLM (Xiao et al., "Efficient Streaming Language Models with Attention Sinks",
// arXiv 2309.17453): the first 4 tokens soak up attention mass whatever they say (attention
// sinks); keeping them plus a recent window keeps the softmax's shape. No scores needed.
#include <algorithm>

#include "kv/kv_cache.h"
#include "kv/token_eviction.h"

namespace brisk::eviction {
namespace {

constexpr int64_t kSinks = 4;

class StreamingPolicy final : public TokenEvictionPolicy {
 public:
  const char* name() const override { return "streaming"; }
  void select(const EvictionInput& in, int64_t budget,
              std::vector<std::vector<int64_t>>& keep) override {
    const int64_t sinks = std::min(kSinks, budget);
    std::vector<int64_t> k;
    for (int64_t p = 0; p < sinks; ++p) k.push_back(p);
    for (int64_t p = in.n_slots - (budget - sinks); p < in.n_slots; ++p) k.push_back(p);
    keep.assign(static_cast<size_t>(in.cache.shape().n_head_kv), k);
  }
};

}  // namespace

std::unique_ptr<TokenEvictionPolicy> streaming() { return std::make_unique<StreamingPolicy>(); }

}  // namespace brisk::eviction
