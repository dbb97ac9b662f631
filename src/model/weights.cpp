#include "model/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <initializer_list>
#include <string>

#include "tensor/quant.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace brisk {
namespace {

std::string shape_string(std::initializer_list<int64_t> ne) { return fmt::format("[{}]", fmt::join(ne, ", ")); }

std::string found_shape(const TensorView& t) {
  std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + std::max(t.n_dims, 1));
  return fmt::format("[{}]", fmt::join(ne, ", "));
}

// The tensor `name` if present, with dtype and shape (GGUF order: row length first) checked.
const TensorView* find_checked(const ModelSource& src, const std::string& name,
                               std::initializer_list<int64_t> shape, bool required) {
  const TensorView* t = src.find(name);
  if (!t) {
    if (required) fail("model '{}' has no tensor '{}'", src.path, name);
    return nullptr;
  }
  const auto ti = dtype_info(static_cast<uint32_t>(t->type));
  if (!ti || !ti->supported)
    fail("tensor '{}' has dtype {}, which brisk cannot compute with", name,
         ti ? std::string(ti->name) : fmt::format("#{}", static_cast<uint32_t>(t->type)));
  bool ok = t->n_dims == static_cast<int>(shape.size());
  int i = 0;
  for (int64_t n : shape) ok = ok && t->ne[i++] == n;
  for (; ok && i < 4; ++i) ok = t->ne[i] == 1;
  if (!ok) fail("tensor '{}' has shape {}, expected {}", name, found_shape(*t), shape_string(shape));
  return t;
}

TensorView matrix(const ModelSource& src, const std::string& name, int64_t cols, int64_t rows) {
  return *find_checked(src, name, {cols, rows}, true);
}

std::vector<float> to_f32(const TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.elements()));
  dequantize_row(t.type, t.data, v.data(), t.elements());
  return v;
}

// A 1-D tensor as owned float32; empty when optional and absent.
std::vector<float> vector_f32(const ModelSource& src, const std::string& name, int64_t n,
                              bool required) {
  const TensorView* t = find_checked(src, name, {n}, required);
  return t ? to_f32(*t) : std::vector<float>{};
}

}  // namespace

Weights load_weights(const ModelSource& src, const ModelConfig& c) {
  Weights w;
  w.token_embd = matrix(src, "token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = vector_f32(src, "output_norm.weight", c.n_embd, true);
  // Tied embeddings: llama.cpp's converters omit output.weight, and so does our HF loader.
  w.output = src.find("output.weight") ? matrix(src, "output.weight", c.n_embd, c.n_vocab)
                                       : w.token_embd;
  w.rope_freqs = vector_f32(src, "rope_freqs.weight", c.head_dim / 2, false);

  // One layer at a time, so that a block_count far beyond the file's layers fails at the
  // first missing tensor rather than after allocating every layer (found by fuzzing).
  for (int64_t l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers.emplace_back();
    const std::string p = fmt::format("blk.{}.", l);
    L.attn_norm = vector_f32(src, p + "attn_norm.weight", c.n_embd, true);
    L.wq = matrix(src, p + "attn_q.weight", c.n_embd, c.q_dim());
    L.wk = matrix(src, p + "attn_k.weight", c.n_embd, c.kv_dim());
    L.wv = matrix(src, p + "attn_v.weight", c.n_embd, c.kv_dim());
    L.wo = matrix(src, p + "attn_output.weight", c.q_dim(), c.n_embd);
    // Qwen2 always has q/k/v biases; some Llama variants (attention_bias=true) do too.
    L.bq = vector_f32(src, p + "attn_q.bias", c.q_dim(), c.qkv_bias);
    L.bk = vector_f32(src, p + "attn_k.bias", c.kv_dim(), c.qkv_bias);
    L.bv = vector_f32(src, p + "attn_v.bias", c.kv_dim(), c.qkv_bias);
    if (c.qk_norm) {
      L.q_norm = vector_f32(src, p + "attn_q_norm.weight", c.head_dim, true);
      L.k_norm = vector_f32(src, p + "attn_k_norm.weight", c.head_dim, true);
    }
    L.ffn_norm = vector_f32(src, p + "ffn_norm.weight", c.n_embd, true);
    L.gate = matrix(src, p + "ffn_gate.weight", c.n_embd, c.n_ff);
    L.up = matrix(src, p + "ffn_up.weight", c.n_embd, c.n_ff);
    L.down = matrix(src, p + "ffn_down.weight", c.n_ff, c.n_embd);
  }
  return w;
}

void pack_matrices(Weights& w) {
  std::vector<TensorView*> ms;
  for (LayerWeights& L : w.layers)
    for (TensorView* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down}) ms.push_back(m);
  ms.push_back(&w.output);
  std::erase_if(ms, [](TensorView* m) { return !packable(*m); });

  auto aligned_bytes = [](const TensorView& m) { return (packed_bytes(m) + 63) / 64 * 64; };
  size_t total = 0;
  for (const TensorView* m : ms) total += aligned_bytes(*m);
  w.packed = HugePageBuffer(total);

  uint8_t* out = w.packed.data();
  for (TensorView* m : ms) {
    const TensorView source = *m;
    *m = pack_matrix_into(source, out);
    out += aligned_bytes(source);
    // The stored copy is not read again (unless it is also the embedding table): let the
    // kernel drop its mapped pages, so the resident set holds the weights once.
    if (source.data != w.token_embd.data) advise_pageout(source.data, source.nbytes());
  }
}

}  // namespace brisk
