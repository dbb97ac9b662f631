#include "kv/block_pool.h"

#include <algorithm>

#include "util/error.h"

namespace brisk {

BlockPool::BlockPool(int64_t n_blocks, int64_t block_size, const std::string& policy,
                     double attn_ratio)
    : block_size_(block_size) {
  if (n_blocks <= 0 || block_size <= 0)
    fail("block pool: {} blocks of {} positions (both must be positive)", n_blocks, block_size);
  if (policy != "off") policy_ = make_eviction_policy(policy, block_size, attn_ratio);
  refs_.assign(static_cast<size_t>(n_blocks), 0);
  meta_.resize(static_cast<size_t>(n_blocks));
  gen_.assign(static_cast<size_t>(n_blocks), 0);
  priority_.assign(static_cast<size_t>(n_blocks), 0.0);
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

void BlockPool::check(int32_t block) const {
  if (block < 0 || block >= n_blocks())
    fail("block pool: block {} out of range (the pool has {} blocks)", block, n_blocks());
}

int32_t BlockPool::refcount(int32_t block) const {
  check(block);
  return refs_[static_cast<size_t>(block)];
}

BlockPool::Key BlockPool::key_of(int32_t block, double priority) const {
  const Meta& m = meta_[static_cast<size_t>(block)];
  return {m.n_children > 0 ? 1 : 0, priority, -m.depth, block};
}

int32_t BlockPool::allocate() {
  int32_t b = -1;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!evictable_.empty()) {
    b = std::get<3>(*evictable_.begin());
    evict(b);
  } else {
    return -1;
  }
  refs_[static_cast<size_t>(b)] = 1;
  ++n_used_;
  return b;
}

void BlockPool::evict(int32_t b) {
  Meta& m = meta_[static_cast<size_t>(b)];
  const double p = priority_[static_cast<size_t>(b)];
  evictable_.erase(key_of(b, p));
  index_.erase(m.hash);
  if (m.parent_block >= 0 && gen_[static_cast<size_t>(m.parent_block)] == m.parent_gen)
    set_children(m.parent_block, -1);
  policy_->on_evict(p);
  ++gen_[static_cast<size_t>(b)];
  ++evictions_;
  m = Meta{};
}

void BlockPool::set_children(int32_t block, int64_t delta) {
  Meta& m = meta_[static_cast<size_t>(block)];
  const bool evictable = m.cached && refs_[static_cast<size_t>(block)] == 0;
  const double p = priority_[static_cast<size_t>(block)];
  if (evictable) evictable_.erase(key_of(block, p));
  m.n_children = std::max<int64_t>(0, m.n_children + delta);
  if (evictable) evictable_.insert(key_of(block, p));
}

void BlockPool::ref(int32_t block) {
  check(block);
  int32_t& r = refs_[static_cast<size_t>(block)];
  if (r == 0) {
    if (!meta_[static_cast<size_t>(block)].cached)
      fail("block pool: ref of free block {} (allocate it first)", block);
    evictable_.erase(key_of(block, priority_[static_cast<size_t>(block)]));
    ++n_used_;
  }
  ++r;
}

void BlockPool::make_evictable(int32_t block) {
  Meta& m = meta_[static_cast<size_t>(block)];
  m.last_use = ++clock_;
  const double p = policy_->priority({m.depth, m.hits, m.last_use});
  priority_[static_cast<size_t>(block)] = p;
  evictable_.insert(key_of(block, p));
}

void BlockPool::unref(int32_t block) {
  check(block);
  int32_t& r = refs_[static_cast<size_t>(block)];
  if (r <= 0) fail("block pool: unref of block {} that nobody references", block);
  if (--r > 0) return;
  --n_used_;
  if (meta_[static_cast<size_t>(block)].cached)
    make_evictable(block);
  else
    free_.push_back(block);
}

int32_t BlockPool::lookup(uint64_t hash, const int32_t* tokens) {
  auto it = index_.find(hash);
  if (it == index_.end()) return -1;
  const int32_t b = it->second;
  Meta& m = meta_[static_cast<size_t>(b)];
  if (!std::equal(m.tokens.begin(), m.tokens.end(), tokens)) return -1;  // a 64-bit collision
  ref(b);
  ++m.hits;
  m.last_use = ++clock_;
  return b;
}

bool BlockPool::publish(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens,
                        int64_t depth) {
  check(block);
  if (!policy_ || index_.count(hash)) return false;
  Meta& m = meta_[static_cast<size_t>(block)];
  if (m.cached) return false;  // already published under another hash
  if (refs_[static_cast<size_t>(block)] <= 0)
    fail("block pool: publish of block {} that nobody references", block);
  m.cached = true;
  m.hash = hash;
  m.parent = parent;
  m.depth = depth;
  m.n_children = 0;
  m.hits = 0;
  m.last_use = ++clock_;
  m.tokens.assign(tokens, tokens + block_size_);
  m.parent_block = -1;
  if (auto p = index_.find(parent); p != index_.end()) {
    m.parent_block = p->second;
    m.parent_gen = gen_[static_cast<size_t>(p->second)];
    set_children(p->second, +1);
  }
  index_[hash] = block;
  return true;
}

}  // namespace brisk
