#include "kv/eviction_policy.h"

#include <algorithm>

#include "util/error.h"

namespace brisk {
namespace {

class LruPolicy final : public EvictionPolicy {
 public:
  const char* name() const override { return "lru"; }
  double priority(const CachedBlockInfo& info) override {
    return static_cast<double>(info.last_use);
  }
};

class GdsfPolicy final : public EvictionPolicy {
 public:
  GdsfPolicy(int64_t block_size, double attn_ratio)
      : block_size_(static_cast<double>(block_size)), attn_ratio_(std::max(1.0, attn_ratio)) {}
  const char* name() const override { return "gdsf"; }
  double priority(const CachedBlockInfo& info) override {
    const double frequency = 1.0 + static_cast<double>(info.hits);
    const double cost =
        block_size_ * (1.0 + (static_cast<double>(info.depth) + 0.5) * block_size_ / attn_ratio_);
    const double size = 1.0;  // every block is one block
    return inflation_ + frequency * cost / size;
  }
  void on_evict(double priority) override { inflation_ = std::max(inflation_, priority); }

 private:
  double block_size_, attn_ratio_;
  double inflation_ = 0;  // L
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name, int64_t block_size,
                                                     double attn_ratio) {
  if (name == "lru") return std::make_unique<LruPolicy>();
  if (name == "gdsf") return std::make_unique<GdsfPolicy>(block_size, attn_ratio);
  fail("unknown prefix-cache eviction policy '{}' (expected lru or gdsf)", name);
}

}  // namespace brisk
