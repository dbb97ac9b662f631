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
    inv_freq_ = rope_inv_freq(config_.rope_base, config_.head_dim, w_.rope_freqs);
  }

  void forward(const Batch& b, KvCache& cache, std::vector<float>& logits) override {
    const ModelConfig& c = config_;
    const int64_t T = b.size(), E = c.n_embd, F = c.n_ff, QD = c.q_dim(), KD = c.kv_dim();
    validate(b, cache);
    logits.clear();
    if (T == 0) return;

    x_.resize(T * E); h_.resize(T * E);
    q_.resize(T * QD); k_.resize(T * KD); v_.resize(T * KD); att_.resize(T * QD);
    gate_.resize(T * F); up_.resize(T * F);
    float *x = x_.data(), *h = h_.data(), *q = q_.data(), *k = k_.data(), *v = v_.data();

    for (int64_t t = 0; t < T; ++t) get_row(w_.token_embd, b.tokens[t], x + t * E);

    const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim,
                               1.0f / std::sqrt(static_cast<float>(c.head_dim))};
    views_.resize(T);
    rope_cs_.resize(T * c.head_dim);
    rope_angles(b.pos.data(), T, inv_freq_.data(), c.head_dim / 2, rope_cs_.data());
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
        rmsnorm(q, L.q_norm.data(), T * c.n_head, c.head_dim, c.norm_eps, att_.data());
        std::copy(att_.begin(), att_.begin() + T * QD, q);
        rmsnorm(k, L.k_norm.data(), T * c.n_head_kv, c.head_dim, c.norm_eps, att_.data());
        std::copy(att_.begin(), att_.begin() + T * KD, k);
      }
      rope(q, T, c.n_head, c.head_dim, rope_cs_.data(), c.rope_neox);
      rope(k, T, c.n_head_kv, c.head_dim, rope_cs_.data(), c.rope_neox);

      // Store this batch's K/V first: a token then attends to the batch's earlier tokens
      // of its sequence exactly as to the cached past.
      // Attention indexes the cache by slot (= position unless token eviction compacted it).
      slots_.resize(T);
      for (int64_t t = 0; t < T; ++t) {
        cache.store(l, b.seq[t], b.pos[t], k + t * KD, v + t * KD);
        views_[t] = &cache.view(l, b.seq[t]);
        slots_[t] = static_cast<int32_t>(cache.slot(l, b.seq[t], b.pos[t]));
      }
      attention(q, T, slots_.data(), views_.data(), shape, att_.data());
      if (cache.evicting())  // each sequence's run of tokens (consecutive positions)
        for (int64_t t0 = 0, t1 = 0; t0 < T; t0 = t1) {
          for (t1 = t0 + 1; t1 < T && b.seq[t1] == b.seq[t0]; ++t1) {}
          cache.observe(l, b.seq[t0], q + t0 * QD, t1 - t0, b.pos[t0], c.n_head, b.logits[t1 - 1]);
        }
      matmul(L.wo, att_.data(), T, h);
      add_inplace(x, h, T * E);

      rmsnorm(x, L.ffn_norm.data(), T, E, c.norm_eps, h);
      {
        const TensorView* W[] = {&L.gate, &L.up};
        float* Y[] = {gate_.data(), up_.data()};
        matmul_multi(W, Y, 2, h, T);
      }
      swiglu(gate_.data(), up_.data(), T * F, gate_.data());
      matmul(L.down, gate_.data(), T, h);
      add_inplace(x, h, T * E);
    }
    for (const auto& [s, last] : last_pos_) cache.set_length(s, last + 1);

    // Only the flagged rows go through the (large) output projection.
    int64_t n_out = 0;
    for (int64_t t = 0; t < T; ++t)
      if (b.logits[t]) std::copy(x + t * E, x + (t + 1) * E, x + (n_out++) * E);  // in place: n_out <= t
    if (n_out == 0) return;
    rmsnorm(x, w_.output_norm.data(), n_out, E, c.norm_eps, h);
    logits.resize(static_cast<size_t>(n_out * n_logits()));
    matmul(output_rows_.empty() ? w_.output : subset_output_.view, h, n_out, logits.data());
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

  Weights w_;
  TensorView output_plain_;      // the output matrix as stored (w_.output is packed)
  PackedMatrix subset_output_;   // set_output_rows' rows of it (.view unpacked if not packable)
  std::vector<uint8_t> subset_rows_;  // their stored bytes, when not packable
  std::vector<float> inv_freq_;
  // scratch, reused across calls
  std::vector<float> x_, h_, q_, k_, v_, att_, gate_, up_, rope_cs_;
  std::vector<const KvSeqView*> views_;
  std::vector<int32_t> slots_;
  std::unordered_map<int32_t, int32_t> last_pos_;  // sequence -> last position in the batch
};

}  // namespace

std::unique_ptr<Model> make_llama_model(ModelSource src, ModelConfig cfg) {
  return std::make_unique<LlamaModel>(std::move(src), std::move(cfg));
}

}  // namespace brisk
