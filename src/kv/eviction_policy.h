// Which unreferenced prefix-cache block to evict when the pool needs a free one.
//
// A policy gives every block that becomes evictable (its last user let go) a priority;
// the pool evicts the lowest first. The pool also prefers leaves (blocks no other cached
// block continues) over inner blocks whatever the policy says, as SGLang's radix cache does:
// an inner block's hash is what makes its descendants reachable, so evicting it would throw
// away their reuse as well. Among equal priorities the deeper block goes first.
//
//  - "lru": least recently used (priority = the logical time of the last use).
//  - "gdsf": GreedyDual-Size-Frequency (L. Cherkasova, "Improving WWW Proxies Performance
//    with Greedy-Dual-Size-Frequency Caching Policy", HP Labs HPL-98-69, 1998; after Cao &
//    Irani's GreedyDual-Size, USENIX ITS '97): priority H = L + frequency * cost / size,
//    with L, the "inflation" clock, set to the priority of each evicted block (aging: a
//    block that was popular long ago does not stay forever). Here size is one block for
//    every block (so it drops out), frequency is 1 + the number of times the block was
//    reused from the cache, and cost is what recomputing the block takes: block_size
//    tokens of the linear layers plus their attention over the depth * block_size tokens
//    before them, cost = block_size * (1 + (depth + 0.5) * block_size / attn_ratio) where
//    attn_ratio is how many attended positions cost as much as one token's linear layers
//    (about params / (2 * n_layer * q_dim) for a llama). So a shared system prompt that
//    many requests hit, and deep blocks of long contexts (expensive to recompute), outlive
//    a one-off prompt's blocks, which LRU would keep merely for being recent.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace brisk {

struct CachedBlockInfo {
  int64_t depth = 0;     // index of the block in its sequence (0: first block)
  uint64_t hits = 0;     // times the block was reused from the cache
  uint64_t last_use = 0; // logical time of the last release or reuse
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual const char* name() const = 0;
  // The priority of a block that just became evictable; lower is evicted first.
  virtual double priority(const CachedBlockInfo& info) = 0;
  // Called with the priority of each block evicted.
  virtual void on_evict(double priority) {}
};

// "lru" or "gdsf"; throws brisk::Error for another name. attn_ratio: see above (gdsf only).
std::unique_ptr<EvictionPolicy> make_eviction_policy(const std::string& name, int64_t block_size,
                                                     double attn_ratio = 2048.0);

}  // namespace brisk
