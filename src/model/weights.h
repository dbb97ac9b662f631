// The tensors of a llama-family model, looked up by GGUF name and checked against the
// config. Matrices stay where the loader mapped them, in their stored dtype (zero copy);
// the small 1-D tensors (norm weights, biases) are converted to owned float32 because the
// kernels take them as float and HF checkpoints store them in f16/bf16.
#pragma once
#include <vector>

#include "format/model_source.h"
#include "kernels/packed_matrix.h"
#include "model/model_config.h"
#include "tensor/tensor_view.h"

namespace brisk {

struct LayerWeights {
  std::vector<float> attn_norm;       // [n_embd]
  TensorView wq, wk, wv, wo;          // [n_embd, q_dim], [n_embd, kv_dim] x2, [q_dim, n_embd]
  std::vector<float> bq, bk, bv;      // optional biases (qwen2): [q_dim], [kv_dim] x2
  std::vector<float> q_norm, k_norm;  // qwen3 per-head RMSNorm: [head_dim]
  std::vector<float> ffn_norm;        // [n_embd]
  TensorView gate, up, down;          // [n_embd, n_ff] x2, [n_ff, n_embd]
};

struct Weights {
  TensorView token_embd;               // [n_embd, n_vocab]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;      // [n_embd]
  TensorView output;                   // [n_embd, n_vocab]; token_embd when tied
  std::vector<float> rope_freqs;       // [head_dim / 2] divisors of inv_freq; empty if absent
  HugePageBuffer packed;               // storage of the matrices pack_matrices repacked
};

// Throws brisk::Error naming the tensor: missing, unsupported dtype, or a shape other than
// the config implies ("tensor 'blk.2.ffn_up.weight' has shape [384, 1000], expected
// [384, 1024]").
Weights load_weights(const ModelSource& src, const ModelConfig& cfg);

// Replaces every matrix the CPU multiplies with a packed integer kernel (Q4_0, Q8_0) by its
// packed copy (kernels/packed_matrix.h), held in w.packed. token_embd stays as stored: rows
// are looked up from it; a tied output matrix gets its own packed copy.
void pack_matrices(Weights& w);

}  // namespace brisk
