// The hyperparameters of a transformer, read from GGUF metadata (HF folders arrive
// translated to the same keys by format/model_source).
#pragma once
#include <cstdint>
#include <string>

#include "format/model_source.h"

namespace brisk {

enum class Arch {
  Llama,  // Llama 1/2/3, Mistral: no biases
  Qwen2,  // Llama + biases on q, k, v
  Qwen3,  // Llama + RMSNorm over each head of q and k before RoPE, no biases
};

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name;  // the general.architecture string
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  float norm_eps = 1e-5f;
  float rope_base = 10000.0f;
  // Which element pairs RoPE rotates: false = (2i, 2i+1) (GGUF llama, whose converter
  // permuted the q/k rows), true = (i, i + head_dim/2) (HF checkpoints; GGUF qwen2/qwen3,
  // which llama.cpp leaves unpermuted).
  bool rope_neox = false;
  bool qkv_bias = false;  // qwen2
  bool qk_norm = false;   // qwen3

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

// Throws brisk::Error naming the key for missing or inconsistent metadata, and naming the
// architecture when it is not one brisk implements.
ModelConfig read_model_config(const ModelSource& src);

}  // namespace brisk
