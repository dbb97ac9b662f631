// Token eviction: keeping only part of a sequence's K/V, per layer and KV head, at a budget
// (a fraction of the sequence's length or a token count). Policies (one file each):
//   streaming  StreamingLLM (Xiao et al., arXiv 2309.17453): 4 "attention sink" tokens
//              plus the most recent ones.
//   h2o        H2O (Zhang et al., arXiv 2306.14048): accumulated attention each key has
//              received ("heavy hitters"), half the budget, plus the recent half.
//   snapkv     SnapKV (Li et al., arXiv 2404.14469): attention of the batch's last (up to
//              32) queries, 1-D average pooling (kernel 5), top keys plus that window.
//   refree     ReFreeKV (arXiv 2502.16886): no budget to choose; each prefill pass keeps
//              what holds the last token's attention within 1% (evict_refree.cpp).
//   tova       TOVA (Oren et al., arXiv 2401.06104): attention of the current (last) query,
//              averaged over the heads sharing the KV head; keep the top.
// The policies run after each layer's attention of every forward pass (so also between
// chunks of a chunked prefill: a prompt longer than a token budget never needs more than
// budget + chunk slots), see KvCache::observe(). Kept positions move down to the lowest
// slots of their KV head; a query then attends to all slots below its own, and since K was
// stored after RoPE the kept keys keep their original positions (unlike StreamingLLM's
// re-indexing within the cache, which we do not do).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace brisk {

class KvCache;

struct TokenBudget {
  double fraction = 0;  // of the sequence's length so far, when > 0
  int64_t tokens = 0;   // a fixed count, when > 0
  int64_t of(int64_t length) const;
};

// One layer of one sequence after a forward pass stored its K/V and ran attention.
struct EvictionInput {
  const KvCache& cache;
  int64_t layer = 0, seq = 0;
  const float* q = nullptr;  // the sequence's batch queries after RoPE, [n_q, n_head, head_dim]
  int64_t n_q = 0, n_head = 0;
  int64_t first_slot = 0;    // slot of the first query (they are consecutive)
  int64_t n_slots = 0;       // slots in use, the batch's included
};

class TokenEvictionPolicy {
 public:
  virtual ~TokenEvictionPolicy() = default;
  virtual const char* name() const = 0;
  // Sees every forward pass of every layer (before select), for policies with state.
  virtual void observe(const EvictionInput& in) {}
  // A policy that picks its own budget per pass returns it here (>= 1); -1: the spec's.
  virtual int64_t adaptive_budget(const EvictionInput& in) { return -1; }
  // True: select only on a pass after which a token is sampled (the prompt's last chunk,
  // decode steps), so a chunked prompt is compressed once, when all of it is in the cache.
  virtual bool waits_for_sampling() const { return false; }
  // keep[h]: the slots KV head h keeps, ascending, `budget` of them for every head. Called
  // only when n_slots > budget; a policy with state compacts it along.
  virtual void select(const EvictionInput& in, int64_t budget,
                      std::vector<std::vector<int64_t>>& keep) = 0;
  virtual void on_clear(int64_t seq) {}
};

// "none" (nullptr), "refree", "streaming:B", "h2o:B", "snapkv:B", "tova:B" with B a fraction in
// (0, 1] or a token count >= 1, or "plan:FILE" (a per-layer plan, kv/kv_plan.h: policy
// "plan", read by KvCache) (--kv-evict). Throws brisk::Error naming the accepted forms.
struct EvictionSpec {
  std::string policy = "none";
  TokenBudget budget;
  std::string plan_file;  // policy "plan"
};
EvictionSpec parse_eviction(const std::string& spec);
std::unique_ptr<TokenEvictionPolicy> make_token_eviction(const EvictionSpec& spec, int64_t n_layer,
                                                         int64_t n_seq, int64_t n_head_kv);

// Softmax attention weights of the input's queries over slots [0, n_slots) of KV head g
// (causal: query i sees slots <= first_slot + i), summed over the query heads sharing g:
// w[i * n_slots + s]. Decodes K from the cache's codec.
void eviction_weights(const EvictionInput& in, int64_t g, std::vector<float>& w);

// The `n` slots with the largest score among [lo, hi) plus all of [hi, n_slots), sorted.
std::vector<int64_t> top_slots_plus_tail(const std::vector<float>& score, int64_t lo, int64_t hi,
                                         int64_t n, int64_t n_slots);

namespace eviction {
std::unique_ptr<TokenEvictionPolicy> streaming();
std::unique_ptr<TokenEvictionPolicy> h2o(int64_t n_layer, int64_t n_seq, int64_t n_head_kv);
std::unique_ptr<TokenEvictionPolicy> snapkv();
std::unique_ptr<TokenEvictionPolicy> tova();
std::unique_ptr<TokenEvictionPolicy> refree();
}  // namespace eviction

}  // namespace brisk
