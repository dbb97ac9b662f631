// The KV block pool's bookkeeping: which blocks are free, who references which (several
// sequences share the blocks of a common cached prefix), and the prefix cache: an index
// from block hash (kv/block_hash.h) to a block holding those tokens' K/V. The K/V bytes
// themselves live in KvCache; this class only hands out block ids.
//
// A block is in one of three states:
//   used    refcount > 0 (some sequence's block table holds it)
//   cached  refcount 0 but published under a hash: reusable by a later prompt with the
//           same prefix; evicted (by the policy, kv/eviction_policy.h) when a free block is
//           needed and none is left
//   free    refcount 0, no content worth keeping
#pragma once
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kv/eviction_policy.h"

namespace brisk {

class BlockPool {
 public:
  // policy: "off" (no prefix cache: released blocks are free at once), "lru" or "gdsf".
  BlockPool(int64_t n_blocks, int64_t block_size, const std::string& policy = "off",
            double attn_ratio = 2048.0);

  int64_t n_blocks() const { return static_cast<int64_t>(refs_.size()); }
  int64_t block_size() const { return block_size_; }
  bool caching() const { return policy_ != nullptr; }
  const char* policy_name() const { return policy_ ? policy_->name() : "off"; }

  // A block with refcount 1: a free one, else the policy's victim among the cached ones;
  // -1 when every block is in use.
  int32_t allocate();
  void ref(int32_t block);
  void unref(int32_t block);  // at 0: cached (if published) or free
  int32_t refcount(int32_t block) const;

  // The cached block of `hash` (its tokens compared to `tokens`, block_size of them) with
  // one more reference, counted as a hit; -1 when not cached.
  int32_t lookup(uint64_t hash, const int32_t* tokens);
  // Whether `hash` is cached (no reference taken, nothing counted).
  bool contains(uint64_t hash) const { return index_.count(hash) > 0; }
  // Offers a full block to the cache under `hash` (chained from `parent`, the previous
  // block's hash, at `depth` in its sequence). False when caching is off or the hash is
  // cached already (then the block stays private to its sequence).
  bool publish(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens,
               int64_t depth);

  int64_t n_used() const { return n_used_; }
  int64_t n_cached() const { return static_cast<int64_t>(evictable_.size()); }
  int64_t n_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t n_available() const { return n_free() + n_cached(); }  // what allocate() can give
  uint64_t evictions() const { return evictions_; }

 private:
  struct Meta {
    bool cached = false;
    uint64_t hash = 0, parent = 0;
    int32_t parent_block = -1;
    uint64_t parent_gen = 0;
    int64_t depth = 0;
    int64_t n_children = 0;  // cached blocks published with this one as parent
    uint64_t hits = 0, last_use = 0;
    std::vector<int32_t> tokens;
  };
  // (inner block?, priority, -depth, block): std::set's order is the eviction order.
  using Key = std::tuple<int, double, int64_t, int32_t>;

  void check(int32_t block) const;
  Key key_of(int32_t block, double priority) const;
  void make_evictable(int32_t block);
  void set_children(int32_t block, int64_t delta);
  void evict(int32_t block);

  int64_t block_size_;
  std::unique_ptr<EvictionPolicy> policy_;
  std::vector<int32_t> refs_;
  std::vector<Meta> meta_;
  std::vector<uint64_t> gen_;        // bumped at every eviction of the block
  std::vector<double> priority_;     // while evictable
  std::vector<int32_t> free_;        // a stack; lowest ids come out first
  std::set<Key> evictable_;
  std::unordered_map<uint64_t, int32_t> index_;  // hash -> cached block
  int64_t n_used_ = 0;
  uint64_t clock_ = 0, evictions_ = 0;
};

}  // namespace brisk
