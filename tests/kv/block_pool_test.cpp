#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <numeric>

#include "kv/block_hash.h"
#include "kv/kv_cache.h"
#include "util/error.h"

namespace brisk {
namespace {

std::vector<int32_t> iota_tokens(int n, int32_t first) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(BlockPool, AllocateFreeRefcount) {
  BlockPool p(4, 16);
  EXPECT_EQ(p.n_free(), 4);
  const int32_t a = p.allocate(), b = p.allocate();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(p.n_used(), 2);
  EXPECT_EQ(p.refcount(a), 1);
  p.ref(a);
  EXPECT_EQ(p.refcount(a), 2);
  p.unref(a);
  EXPECT_EQ(p.n_used(), 2);
  p.unref(a);
  EXPECT_EQ(p.n_used(), 1);
  EXPECT_EQ(p.n_free(), 3);
  EXPECT_EQ(p.allocate(), a);  // reused
  EXPECT_GE(p.allocate(), 0);
  EXPECT_GE(p.allocate(), 0);
  EXPECT_EQ(p.allocate(), -1);  // all in use
  EXPECT_THROW(p.unref(-1), Error);
  EXPECT_THROW(p.ref(7), Error);
  p.unref(b);
  EXPECT_THROW(p.unref(b), Error);  // nobody references it any more
  EXPECT_THROW(p.ref(b), Error);    // a free block must be allocated, not ref'd
  EXPECT_THROW(BlockPool(0, 16), Error);
  EXPECT_THROW(BlockPool(4, 16, "fifo"), Error);
}

TEST(BlockPool, OffMeansNoCache) {
  BlockPool p(2, 4, "off");
  const auto t = iota_tokens(4, 10);
  const int32_t a = p.allocate();
  EXPECT_FALSE(p.publish(a, hash_block(kRootBlockHash, t.data(), 4), kRootBlockHash, t.data(), 0));
  p.unref(a);
  EXPECT_EQ(p.n_cached(), 0);
  EXPECT_EQ(p.lookup(hash_block(kRootBlockHash, t.data(), 4), t.data()), -1);
}

TEST(BlockPool, PublishedBlocksAreSharedAndCached) {
  BlockPool p(4, 4, "lru");
  const auto t = iota_tokens(8, 100);
  const auto h = hash_full_blocks(t, 4);
  ASSERT_EQ(h.size(), 2u);
  const int32_t a = p.allocate(), b = p.allocate();
  EXPECT_TRUE(p.publish(a, h[0], kRootBlockHash, t.data(), 0));
  EXPECT_TRUE(p.publish(b, h[1], h[0], t.data() + 4, 1));
  const int32_t dup = p.allocate();
  EXPECT_FALSE(p.publish(dup, h[0], kRootBlockHash, t.data(), 0));  // already cached: stays private
  p.unref(dup);
  // A second sequence with the same prefix shares a and b.
  EXPECT_EQ(p.lookup(h[0], t.data()), a);
  EXPECT_EQ(p.lookup(h[1], t.data() + 4), b);
  EXPECT_EQ(p.refcount(a), 2);
  const auto other = iota_tokens(4, 999);
  EXPECT_EQ(p.lookup(h[0], other.data()), -1);  // same hash, other tokens: not a hit
  EXPECT_EQ(p.lookup(hash_block(kRootBlockHash, other.data(), 4), other.data()), -1);
  for (int i = 0; i < 2; ++i) {
    p.unref(b);
    p.unref(a);
  }
  EXPECT_EQ(p.n_used(), 0);
  EXPECT_EQ(p.n_cached(), 2);
  EXPECT_EQ(p.n_free(), 2);
  EXPECT_EQ(p.n_available(), 4);
  // Still found after every user let go; a hit takes it out of the evictable set.
  EXPECT_EQ(p.lookup(h[0], t.data()), a);
  EXPECT_EQ(p.n_cached(), 1);
  EXPECT_EQ(p.n_used(), 1);
  p.unref(a);
}

TEST(BlockPool, FreeBlocksGoBeforeCachedOnes) {
  BlockPool p(3, 2, "lru");
  const auto t = iota_tokens(2, 1);
  const uint64_t h = hash_block(kRootBlockHash, t.data(), 2);
  const int32_t a = p.allocate();
  p.publish(a, h, kRootBlockHash, t.data(), 0);
  p.unref(a);
  const int32_t x = p.allocate(), y = p.allocate();
  EXPECT_NE(x, a);
  EXPECT_NE(y, a);
  EXPECT_TRUE(p.contains(h));
  EXPECT_EQ(p.allocate(), a);  // only now is the cached block evicted
  EXPECT_FALSE(p.contains(h));
  EXPECT_EQ(p.evictions(), 1u);
  EXPECT_EQ(p.allocate(), -1);
}

// Publishes `n` one-block chains (independent prefixes) as blocks and releases them in
// order; returns their hashes.
struct Chain {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> hashes;
  std::vector<int32_t> blocks;
};

Chain make_chain(BlockPool& p, int n_blocks, int32_t first_token) {
  Chain c;
  c.tokens = iota_tokens(n_blocks * static_cast<int>(p.block_size()), first_token);
  c.hashes = hash_full_blocks(c.tokens, p.block_size());
  for (int i = 0; i < n_blocks; ++i) {
    const int32_t b = p.allocate();
    EXPECT_GE(b, 0);
    const uint64_t parent = i == 0 ? kRootBlockHash : c.hashes[static_cast<size_t>(i - 1)];
    EXPECT_TRUE(p.publish(b, c.hashes[static_cast<size_t>(i)], parent,
                          c.tokens.data() + i * p.block_size(), i));
    c.blocks.push_back(b);
  }
  return c;
}
void release(BlockPool& p, const Chain& c) {
  for (auto it = c.blocks.rbegin(); it != c.blocks.rend(); ++it) p.unref(*it);
}
void hit(BlockPool& p, const Chain& c, int n_blocks) {
  for (int i = 0; i < n_blocks; ++i)
    EXPECT_EQ(p.lookup(c.hashes[static_cast<size_t>(i)], c.tokens.data() + i * p.block_size()),
              c.blocks[static_cast<size_t>(i)]);
  for (int i = n_blocks - 1; i >= 0; --i) p.unref(c.blocks[static_cast<size_t>(i)]);
}
// Which of the chains' blocks survive (true per block, in order).
std::vector<bool> alive(const BlockPool& p, const Chain& c) {
  std::vector<bool> v;
  for (uint64_t h : c.hashes) v.push_back(p.contains(h));
  return v;
}

TEST(BlockPool, LruEvictsLeastRecentlyUsedLeavesFirst) {
  BlockPool p(6, 4, "lru");
  Chain a = make_chain(p, 2, 0), b = make_chain(p, 2, 100), c = make_chain(p, 2, 200);
  release(p, a);
  release(p, b);
  release(p, c);
  hit(p, a, 2);  // a is now the most recent
  // Order: b's tail (leaf, oldest), then b's head (now a leaf), then c's tail, ...
  std::vector<int32_t> order;
  for (int i = 0; i < 6; ++i) order.push_back(p.allocate());
  EXPECT_EQ(order, (std::vector<int32_t>{b.blocks[1], b.blocks[0], c.blocks[1], c.blocks[0],
                                         a.blocks[1], a.blocks[0]}));
}

TEST(BlockPool, LruKeepsInnerBlocksWhileTheirChildrenAreCached) {
  BlockPool p(3, 4, "lru");
  Chain a = make_chain(p, 2, 0);
  p.unref(a.blocks[0]);  // the head is released first (older) but has a cached child
  Chain x = make_chain(p, 1, 500);
  release(p, x);
  p.unref(a.blocks[1]);
  // LRU alone would evict a's head first; it is an inner block, so x (a leaf) goes first.
  EXPECT_EQ(p.allocate(), x.blocks[0]);
  EXPECT_EQ(p.allocate(), a.blocks[1]);
  EXPECT_EQ(p.allocate(), a.blocks[0]);
}

// The crafted sequence for both policies: a block reused three times, a one-off block, a
// deep chain of three blocks, and a one-off block released last. Six blocks, all cached.
struct Crafted {
  Chain popular, once, deep, recent;
};
Crafted craft(BlockPool& p) {
  Crafted c;
  c.popular = make_chain(p, 1, 0);
  c.once = make_chain(p, 1, 100);
  c.deep = make_chain(p, 3, 200);
  release(p, c.popular);
  release(p, c.once);
  release(p, c.deep);
  for (int i = 0; i < 3; ++i) hit(p, c.popular, 1);
  c.recent = make_chain(p, 1, 300);
  release(p, c.recent);
  EXPECT_EQ(p.n_cached(), 6);
  EXPECT_EQ(p.n_free(), 0);
  return c;
}

TEST(BlockPool, LruOnTheCraftedSequence) {
  BlockPool p(6, 4, "lru");
  Crafted c = craft(p);
  // Leaves by last use: once, deep[2] (released in the same pass, deeper first... once was
  // released before deep), then deep[1], deep[0] as they become leaves, popular, recent.
  std::vector<int32_t> order;
  for (int i = 0; i < 6; ++i) order.push_back(p.allocate());
  EXPECT_EQ(order, (std::vector<int32_t>{c.once.blocks[0], c.deep.blocks[2], c.deep.blocks[1],
                                         c.deep.blocks[0], c.popular.blocks[0], c.recent.blocks[0]}));
}

TEST(BlockPool, GdsfOnTheCraftedSequence) {
  // attn_ratio 4 with block_size 4: a block at depth d costs 4 * (1 + (d + 0.5)) = 6 + 4d.
  // H = L + (1 + hits) * cost: popular 4 * 6 = 24, once 6, deep 6 / 10 / 14 (depth 0..2),
  // recent 6; L = 0 so far.
  BlockPool p(6, 4, "gdsf", 4.0);
  Crafted c = craft(p);
  // Leaves first, lowest H first (ties: deeper, then lower id): once, recent, deep[2].
  EXPECT_EQ(p.allocate(), c.once.blocks[0]);
  EXPECT_EQ(p.allocate(), c.recent.blocks[0]);  // LRU would have kept it longest
  const int32_t third = p.allocate();
  EXPECT_EQ(third, c.deep.blocks[2]);  // L = 14 now
  EXPECT_TRUE(p.contains(c.popular.hashes[0]));
  // deep[1] is a leaf now (H 10, set when it was released): the next victim.
  // (third stays allocated, so the next block comes from the cache again)
  Chain late = make_chain(p, 1, 400);
  EXPECT_EQ(late.blocks[0], c.deep.blocks[1]);
  release(p, late);  // aging: H = L + 6 = 20, close to the old popular block's 24
  EXPECT_EQ(p.allocate(), c.deep.blocks[0]);     // H 6
  EXPECT_EQ(p.allocate(), late.blocks[0]);       // H 20
  EXPECT_EQ(p.allocate(), c.popular.blocks[0]);  // H 24: reuse kept it the longest
}

TEST(KvCachePaged, ManagedTablesMapPositionsToBlocks) {
  KvCacheShape s{2, 2, 8, 1, 2};
  s.block_size = 4;
  s.n_blocks = 5;
  KvCache c(s);
  EXPECT_TRUE(c.managed());
  EXPECT_EQ(c.blocks_per_seq(), 2);
  EXPECT_THROW(c.check_write(0, 0, 0), Error);  // no block assigned
  c.set_block(0, 0, 3);
  c.set_block(0, 1, 1);
  c.set_block(1, 0, 3);  // shared with slot 0
  EXPECT_NO_THROW(c.check_write(0, 5, 5));
  c.k_row(1, 0, 5)[1] = 2.5f;
  c.v_row(1, 0, 2)[0] = -1.0f;
  EXPECT_EQ(c.block_k(1, 1)[1 * 2 + 1], 2.5f);  // block 1, row 1
  EXPECT_EQ(c.view(1, 0).k(5)[1], 2.5f);
  EXPECT_EQ(c.view(1, 1).v(2)[0], -1.0f);  // slot 1 sees the shared block
  EXPECT_EQ(c.block(0, 1), 1);
  EXPECT_THROW(c.set_block(0, 2, 0), Error);
  EXPECT_THROW(c.set_block(0, 0, 5), Error);
  c.set_length(0, 6);
  c.reset_slot(0);
  EXPECT_EQ(c.length(0), 0);
  EXPECT_EQ(c.block(0, 0), -1);
  EXPECT_EQ(c.view(1, 1).v(2)[0], -1.0f);
}

TEST(KvCachePaged, StaticCacheWithSmallBlocksIsContiguousPerSlot) {
  KvCacheShape s{1, 2, 10, 1, 2};
  s.block_size = 4;
  KvCache c(s);
  EXPECT_FALSE(c.managed());
  EXPECT_EQ(c.n_blocks(), 6);
  c.k_row(0, 1, 9)[0] = 4.0f;
  EXPECT_EQ(c.view(0, 1).k(9)[0], 4.0f);
  EXPECT_EQ(c.view(0, 0).k(9)[0], 0.0f);
  EXPECT_NO_THROW(c.check_write(1, 9, 9));
  EXPECT_THROW(c.check_write(1, 10, 10), Error);
}

}  // namespace
}  // namespace brisk
