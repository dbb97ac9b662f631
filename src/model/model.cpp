#include "model/model.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "util/error.h"

namespace brisk {

void Model::set_output_rows(std::vector<int32_t> ids) {
  if (!ids.empty()) fail("this backend computes the whole vocabulary's logits (no --draft-vocab)");
  output_rows_.clear();
}

void Model::vocab_logits(const float* row, float* out) const {
  if (output_rows_.empty()) return void(std::copy_n(row, config_.n_vocab, out));
  std::fill_n(out, config_.n_vocab, -std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < output_rows_.size(); ++i) out[output_rows_[i]] = row[i];
}

void Model::check_output_rows(const std::vector<int32_t>& ids) const {
  std::vector<bool> seen(static_cast<size_t>(config_.n_vocab));
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= config_.n_vocab)
      fail("output rows: entry {} is token {}, outside the vocabulary [0, {})", i, id, config_.n_vocab);
    if (seen[static_cast<size_t>(id)]) fail("output rows: token {} is listed twice", id);
    seen[static_cast<size_t>(id)] = true;
  }
}

std::unique_ptr<Model> make_llama_model(ModelSource src, ModelConfig cfg);  // llama.cpp

std::unique_ptr<Model> make_model(ModelSource src) {
  ModelConfig cfg = read_model_config(src);
  switch (cfg.arch) {
    case Arch::Llama:
    case Arch::Qwen2:
    case Arch::Qwen3:
      return make_llama_model(std::move(src), std::move(cfg));
  }
  return nullptr;  // unreachable: read_model_config rejects other architectures
}

std::unique_ptr<Model> load_model(const std::string& path) { return make_model(load_model_source(path)); }

}  // namespace brisk
