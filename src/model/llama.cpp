// The llama family forward pass (Llama, Mistral, Qwen2, Qwen3), written as the math:
//
//   x = embed(tokens)
//   for each layer:
//     h = rmsnorm(x) * attn_norm
//     q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)
//     q, k = rmsnorm_per_head(q) * q_norm, rmsnorm_per_head(k) * k_norm      (qwen3)
//     q, k = rope(q, pos), rope(k, pos);  cache[pos] = k, v
//     x += attention(q, cache) Wo
//     h = rmsnorm(x) * ffn_norm
//     x += (silu(h Wgate) * h Wup) Wdown
//   logits = (rmsnorm(x) * output_norm) Wout          (only for the flagged tokens)
//
// All activations are float32, [n_tokens, features] row-major.
#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <vector>

#include "kernels/attention.h"
#include "kernels/ops.h"
#include "model/model.h"
#include "model/rope_freqs.h"
#include "model/weights.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace brisk {
namespace {

void add_inplace(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

// b broadcast over n_tokens rows of length n.
void add_bias(float* x, const std::vector<float>& b, int64_t n_tokens) {
  if (b.empty()) return;
  const int64_t n = static_cast<int64_t>(b.size());
  for (int64_t t = 0; t < n_tokens; ++t) add_inplace(x + t * n, b.data(), n);
}

class LlamaModel final : public Model {
 public:
  LlamaModel(ModelSource src, ModelConfig cfg) : Model(std::move(src), std::move(cfg)) {
    w_ = load_weights(source_, config_);
    output_plain_ = w_.output;  // still the stored rows (set_output_rows gathers from them)
    pack_matrices(w_);
    matrix_bytes_ = w_.output.nbytes();
    for (const LayerWeights& L : w_.layers)
      for (const TensorView* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) matrix_bytes_ += m->nbytes();
    inv_freq_ = rope_inv_freq(config_.rope_base, config_.head_dim, w_.rope_freqs);
  }

  void forward(const Batch& b, KvCache& cache, std::vector<float>& logits) override {
    validate(b, cache);
    logits.clear();
    const int64_t T = b.size();
    if (T == 0) return;
    const std::vector<int64_t> cut = split_by_sequence(b, cache);
    const size_t n_parts = cut.size() - 1;
    std::vector<int64_t> first_logit(n_parts + 1, 0);  // each part's first logits row
    for (size_t i = 0; i < n_parts; ++i)
      first_logit[i + 1] = first_logit[i] + std::count(b.logits.begin() + cut[i], b.logits.begin() + cut[i + 1], 1);
    logits.resize(static_cast<size_t>(first_logit[n_parts] * n_logits()));
    if (scratch_.size() < n_parts) scratch_.resize(n_parts);
    const int64_t E = config_.n_embd;
    normed_.resize(static_cast<size_t>(first_logit[n_parts] * E));
    auto part = [&](size_t i) {  // its layers; its rows into the output projection to normed_
      const int64_t t0 = cut[i];
      const Tokens tok{b.tokens.data() + t0, b.pos.data() + t0, b.seq.data() + t0, b.logits.data() + t0,
                       cut[i + 1] - t0};
      const float* normed = forward_tokens(tok, cache, scratch_[i]);
      std::copy(normed, normed + (first_logit[i + 1] - first_logit[i]) * E, normed_.data() + first_logit[i] * E);
    };
    if (n_parts == 1) {
      part(0);
    } else {
      ThreadPool::global().parallel_for(static_cast<int64_t>(n_parts), [&](int64_t p0, int64_t p1, int) {
        ThreadPool::Serial alone;  // this part's regions run on this thread only
        for (int64_t i = p0; i < p1; ++i) part(static_cast<size_t>(i));
      });
    }
    // One output projection of all the parts' rows over the whole pool: each thread reads
    // its share of that (large) matrix, where every part used to read all of it for its own
    // rows (brisk-tiny: a third of the weights).
    if (first_logit[n_parts] > 0) matmul(output(), normed_.data(), first_logit[n_parts], logits.data());
    for (const auto& [s, last] : last_pos_) cache.set_length(s, last + 1);
  }

  void set_output_rows(std::vector<int32_t> ids) override {
    check_output_rows(ids);
    subset_output_ = {};
    output_rows_.clear();
    if (ids.empty()) return;
    // The chosen rows, gathered from the stored matrix, then packed as the whole one is.
    const TensorView& src = output_plain_;
    const size_t rb = src.row_size();
    subset_rows_.resize(rb * ids.size());
    for (size_t i = 0; i < ids.size(); ++i) std::copy_n(src.row(ids[i]), rb, subset_rows_.data() + i * rb);
    TensorView v = src;
    v.name += " (subset)";
    v.ne = {src.ne[0], static_cast<int64_t>(ids.size()), 1, 1};
    v.data = subset_rows_.data();
    if (packable(v)) {
      subset_output_ = pack_matrix(v);
      subset_rows_ = {};
    } else {
      subset_output_.view = v;
    }
    output_rows_ = std::move(ids);
  }

 private:
  // Everything that could go wrong is checked before the cache is written, so a bad
  // batch leaves the cache as it was.
  void validate(const Batch& b, const KvCache& cache) {
    const int64_t T = b.size();
    if (static_cast<int64_t>(b.pos.size()) != T || static_cast<int64_t>(b.seq.size()) != T ||
        static_cast<int64_t>(b.logits.size()) != T)
      fail("batch: {} tokens but {} positions, {} sequence ids, {} logit flags", T, b.pos.size(),
           b.seq.size(), b.logits.size());
    const KvCacheShape& cs = cache.shape();
    if (cs.n_layer != config_.n_layer || cs.n_head_kv != config_.n_head_kv ||
        cs.head_dim != config_.head_dim)
      fail("KV cache shaped for {} layers x {} KV heads x {} dims, model has {} x {} x {}",
           cs.n_layer, cs.n_head_kv, cs.head_dim, config_.n_layer, config_.n_head_kv,
           config_.head_dim);
    last_pos_.clear();
    for (int64_t t = 0; t < T; ++t) {
      if (b.tokens[t] < 0 || b.tokens[t] >= config_.n_vocab)
        fail("batch: token {} has id {}, outside the vocabulary [0, {})", t, b.tokens[t],
             config_.n_vocab);
      const int32_t s = b.seq[t], p = b.pos[t];
      auto it = last_pos_.find(s);
      if (it == last_pos_.end()) {
        cache.check_write(s, p, cache.length(s));  // may start anywhere up to the length
        last_pos_.emplace(s, p);
      } else {
        if (p != it->second + 1)
          fail("batch: token {} of sequence {} has position {}, expected {} (positions of a "
               "sequence must be consecutive)", t, s, p, it->second + 1);
        cache.check_write(s, p, p);
        it->second = p;
      }
    }
  }

  // A run of the batch's tokens (whole sequences).
  struct Tokens {
    const int32_t *id, *pos, *seq;
    const uint8_t* want_logits;
    int64_t n;
  };
  // Activations of one run, reused across calls.
  struct Scratch {
    std::vector<float> x, h, q, k, v, att, gate, up, rope_cs;
    std::vector<const KvSeqView*> views;
    std::vector<int32_t> slots;
  };

  // The layers over one run of tokens; returns its flagged tokens' final normed rows, in
  // order (the output projection's input, in `s`). Every row's result is the same whatever
  // else is in the batch.
  const float* forward_tokens(const Tokens& b, KvCache& cache, Scratch& s) {
    const ModelConfig& c = config_;
    const int64_t T = b.n, E = c.n_embd, F = c.n_ff, QD = c.q_dim(), KD = c.kv_dim();
    s.x.resize(T * E); s.h.resize(T * E);
    s.q.resize(T * QD); s.k.resize(T * KD); s.v.resize(T * KD); s.att.resize(T * QD);
    s.gate.resize(T * F); s.up.resize(T * F);
    float *x = s.x.data(), *h = s.h.data(), *q = s.q.data(), *k = s.k.data(), *v = s.v.data();
    float *att = s.att.data(), *gate = s.gate.data(), *up = s.up.data();

    for (int64_t t = 0; t < T; ++t) get_row(w_.token_embd, b.id[t], x + t * E);

    const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim,
                               1.0f / std::sqrt(static_cast<float>(c.head_dim))};
    s.views.resize(T);
    s.slots.resize(T);
    s.rope_cs.resize(T * c.head_dim);
    rope_angles(b.pos, T, inv_freq_.data(), c.head_dim / 2, s.rope_cs.data());
    for (int64_t l = 0; l < c.n_layer; ++l) {
      const LayerWeights& L = w_.layers[static_cast<size_t>(l)];

      rmsnorm(x, L.attn_norm.data(), T, E, c.norm_eps, h);
      {
        const TensorView* W[] = {&L.wq, &L.wk, &L.wv};
        float* Y[] = {q, k, v};
        matmul_multi(W, Y, 3, h, T);  // = matmul(L.wq, h, T, q) etc., one parallel region
      }
      add_bias(q, L.bq, T);
      add_bias(k, L.bk, T);
      add_bias(v, L.bv, T);
      if (c.qk_norm) {  // each head's vector normalized on its own (rows of head_dim)
        rmsnorm(q, L.q_norm.data(), T * c.n_head, c.head_dim, c.norm_eps, att);
        std::copy(att, att + T * QD, q);
        rmsnorm(k, L.k_norm.data(), T * c.n_head_kv, c.head_dim, c.norm_eps, att);
        std::copy(att, att + T * KD, k);
      }
      rope(q, T, c.n_head, c.head_dim, s.rope_cs.data(), c.rope_neox);
      rope(k, T, c.n_head_kv, c.head_dim, s.rope_cs.data(), c.rope_neox);

      // Store this batch's K/V first: a token then attends to the batch's earlier tokens
      // of its sequence exactly as to the cached past.
      // Attention indexes the cache by slot (= position unless token eviction compacted it).
      for (int64_t t = 0; t < T; ++t) {
        cache.store(l, b.seq[t], b.pos[t], k + t * KD, v + t * KD);
        s.views[t] = &cache.view(l, b.seq[t]);
        s.slots[t] = static_cast<int32_t>(cache.slot(l, b.seq[t], b.pos[t]));
      }
      attention(q, T, s.slots.data(), s.views.data(), shape, att);
      if (cache.evicting())  // each sequence's run of tokens (consecutive positions)
        for (int64_t t0 = 0, t1 = 0; t0 < T; t0 = t1) {
          for (t1 = t0 + 1; t1 < T && b.seq[t1] == b.seq[t0]; ++t1) {}
          cache.observe(l, b.seq[t0], q + t0 * QD, t1 - t0, b.pos[t0], c.n_head, b.want_logits[t1 - 1]);
        }
      matmul(L.wo, att, T, h);
      add_inplace(x, h, T * E);

      rmsnorm(x, L.ffn_norm.data(), T, E, c.norm_eps, h);
      {
        const TensorView* W[] = {&L.gate, &L.up};
        float* Y[] = {gate, up};
        matmul_multi(W, Y, 2, h, T);
      }
      swiglu(gate, up, T * F, gate);
      matmul(L.down, gate, T, h);
      add_inplace(x, h, T * E);
    }

    // Only the flagged rows go through the (large) output projection.
    int64_t n_out = 0;
    for (int64_t t = 0; t < T; ++t)
      if (b.want_logits[t]) std::copy(x + t * E, x + (t + 1) * E, x + (n_out++) * E);  // in place: n_out <= t
    if (n_out > 0) rmsnorm(x, w_.output_norm.data(), n_out, E, c.norm_eps, h);
    return h;
  }
  const TensorView& output() const { return output_rows_.empty() ? w_.output : subset_output_.view; }

  // Where to cut the batch so that each of the pool's threads runs whole sequences through
  // every layer on its own (the cut points: first 0, last T). Splitting every matmul
  // between the threads instead costs two hand-overs an op, each moving activations
  // between the cores' caches; from 3 tokens a thread that costs more than each thread
  // reading every weight itself, as long as the weights stay in the shared cache. Measured
  // (2 threads, one step alternated with the other way, docs/benchmarks.md): brisk-tiny q8_0
  // (20 MB) 16 decodes 0.84-0.86x the time, 6 decodes 0.85x, 4 decodes 1.03x; brisk-tiny f16
  // (38 MB) 0.96x at 16 but 1.43x at 6; brisk-small f16 (84 MB) 1.01-1.37x. So: weights of
  // at most kSplitMaxWeightBytes (a chiplet's 32 MiB L3, less the rest of the working set),
  // every part at least kMinPartTokens, none more than 1.25x its share (a long prompt's
  // chunk beside a few decodes stays one part).
  static constexpr int64_t kMinPartTokens = 3;
  static constexpr size_t kSplitMaxWeightBytes = size_t{24} << 20;
  std::vector<int64_t> split_by_sequence(const Batch& b, const KvCache& cache) const {
    const int64_t T = b.size();
    const int64_t P = std::min<int64_t>(ThreadPool::global().size(), T / kMinPartTokens);
    if (P < 2 || matrix_bytes_ > kSplitMaxWeightBytes || cache.evicting())  // eviction's observers keep shared state
      return {0, T};
    std::vector<int64_t> runs;  // where each sequence's tokens start; each must be one run
    for (int64_t t = 0; t < T; ++t)
      if (t == 0 || b.seq[t] != b.seq[t - 1]) runs.push_back(t);
    if (static_cast<int64_t>(runs.size()) != static_cast<int64_t>(last_pos_.size()) ||
        static_cast<int64_t>(runs.size()) < P)
      return {0, T};
    std::vector<int64_t> cut{0};
    size_t r = 0;
    for (int64_t i = 1; i < P; ++i) {  // the run start nearest to i T / P
      const int64_t target = i * T / P;
      while (r + 1 < runs.size() && std::abs(runs[r + 1] - target) <= std::abs(runs[r] - target)) ++r;
      if (runs[r] > cut.back()) cut.push_back(runs[r]);
    }
    cut.push_back(T);
    for (size_t i = 0; i + 1 < cut.size(); ++i) {
      const int64_t n = cut[i + 1] - cut[i];
      if (n < kMinPartTokens || n * 4 > 5 * T / P) return {0, T};
    }
    return cut;
  }

  Weights w_;
  TensorView output_plain_;      // the output matrix as stored (w_.output is packed)
  PackedMatrix subset_output_;   // set_output_rows' rows of it (.view unpacked if not packable)
  std::vector<uint8_t> subset_rows_;  // their stored bytes, when not packable
  std::vector<float> inv_freq_;
  size_t matrix_bytes_ = 0;  // what one forward pass reads of the weights
  std::vector<Scratch> scratch_;  // one a part of the batch
  std::vector<float> normed_;     // the parts' rows into the output projection
  std::unordered_map<int32_t, int32_t> last_pos_;  // sequence -> last position in the batch
};

}  // namespace

std::unique_ptr<Model> make_llama_model(ModelSource src, ModelConfig cfg) {
  return std::make_unique<LlamaModel>(std::move(src), std::move(cfg));
}

}  // namespace brisk
