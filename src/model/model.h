// A loaded model: its config, its weights, and the forward pass. One implementation per
// architecture family (llama.cpp here covers llama, mistral, qwen2, qwen3).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "format/model_source.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/model_config.h"

namespace brisk {

class Model {
 public:
  virtual ~Model() = default;

  const ModelConfig& config() const { return config_; }
  const ModelSource& source() const { return source_; }

  // A cache shaped for this model: n_seq sequence slots of n_ctx positions each, storing
  // K/V as set_kv_type() chose (--kv-type; f32 unless set).
  KvCacheShape cache_shape(int64_t n_seq, int64_t n_ctx) const {
    KvCacheShape s{config_.n_layer, n_seq, n_ctx, config_.n_head_kv, config_.head_dim};
    s.kv_type = kv_type_;
    s.kv_evict = kv_evict_;
    s.plan = plan_;
    return s;
  }
  // Token eviction of the caches made by cache_shape (--kv-evict; "none" unless set). A
  // plan:FILE is read here, once, and checked against the model (and --kv-type, so set
  // that first). Throws brisk::Error for a bad spelling or plan.
  virtual void set_kv_evict(const std::string& spec) {
    const EvictionSpec e = parse_eviction(spec);
    plan_ = e.policy == "plan" ? std::make_shared<const KvPlan>(read_kv_plan(e.plan_file)) : nullptr;
    kv_evict_ = spec;
    if (plan_) KvCache check(cache_shape(1, 1));  // throws for a plan that does not fit
  }
  // Throws brisk::Error when the type does not suit the model's head_dim or this backend.
  virtual void set_kv_type(KvType t) {
    kv_head_bytes(t, config_.head_dim);
    kv_type_ = t;
  }
  KvType kv_type() const { return kv_type_; }

  // Runs the batch: writes its K/V into `cache` and sets `logits` to the logits of the
  // tokens whose flag is set, in batch order, n_vocab floats each. Per sequence, the
  // batch's tokens must have consecutive positions starting at most at the cache's current
  // length (so re-feeding rolls the sequence back to there); after the call the sequence's
  // length is its last position + 1. Throws brisk::Error on a bad batch (token id out of
  // range, position beyond the cache capacity, a hole, a position whose KV block is not
  // assigned in a managed cache) before touching the cache. Sequence ids are the cache's
  // slots; a managed (paged) cache's block tables are set by its owner beforehand.
  virtual void forward(const Batch& batch, KvCache& cache, std::vector<float>& logits) = 0;

  // Whether forward() reads and writes K/V through the cache's block tables (the CPU
  // path). A model that keeps its own per-slot K/V elsewhere (e.g. in GPU memory) returns
  // false; then blocks cannot be shared between sequences and the serving engine turns
  // prefix caching off.
  virtual bool uses_kv_blocks() const { return true; }

  // FR-Spec (Zhao et al., ACL 2025, arXiv 2502.14856): a draft model only needs the logits of likely
  // tokens, and a small model's output projection is its largest matrix. After this call
  // forward() gives ids.size() logits per flagged token, the i-th for token ids[i]; an empty
  // list restores the whole vocabulary. Throws brisk::Error for an id outside the vocabulary,
  // a repeated id, or a backend without it.
  virtual void set_output_rows(std::vector<int32_t> ids);
  int64_t n_logits() const {
    return output_rows_.empty() ? config_.n_vocab : static_cast<int64_t>(output_rows_.size());
  }
  // One row of forward()'s logits (n_logits() floats) spread over the whole vocabulary
  // (n_vocab floats): the tokens left out get -inf, probability 0.
  void vocab_logits(const float* row, float* out) const;

 protected:
  Model(ModelSource src, ModelConfig cfg) : source_(std::move(src)), config_(std::move(cfg)) {}
  ModelSource source_;  // owns the mappings the weights point into
  ModelConfig config_;
  KvType kv_type_ = KvType::f32;
  std::string kv_evict_ = "none";
  std::shared_ptr<const KvPlan> plan_;  // kv_evict_ plan:FILE, read
  std::vector<int32_t> output_rows_;    // set_output_rows; empty: the whole vocabulary

  // Checks set_output_rows' ids (in the vocabulary, no repeats).
  void check_output_rows(const std::vector<int32_t>& ids) const;
};

// Builds the model for the source's architecture (config and weights checked).
std::unique_ptr<Model> make_model(ModelSource src);
// load_model_source + make_model.
std::unique_ptr<Model> load_model(const std::string& path);

}  // namespace brisk
