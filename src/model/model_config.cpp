#include "model/model_config.h"

#include "util/error.h"

namespace brisk {

static Arch parse_arch(const std::string& name) {
  if (name == "llama" || name == "mistral") return Arch::Llama;
  if (name == "qwen2") return Arch::Qwen2;
  if (name == "qwen3") return Arch::Qwen3;
  fail("unsupported model architecture '{}' (general.architecture); brisk implements llama, "
       "mistral, qwen2, qwen3", name);
}

ModelConfig read_model_config(const ModelSource& src) {
  const GgufMetadata& m = src.meta;
  ModelConfig c;
  c.arch_name = m.get_string("general.architecture");
  c.arch = parse_arch(c.arch_name);
  const std::string a = c.arch_name + ".";

  c.n_layer = m.get_int(a + "block_count");
  c.n_embd = m.get_int(a + "embedding_length");
  c.n_ff = m.get_int(a + "feed_forward_length");
  c.n_head = m.get_int(a + "attention.head_count");
  c.n_head_kv = m.get_int(a + "attention.head_count_kv", c.n_head);  // absent: no GQA
  if (c.n_head <= 0) fail("{}attention.head_count is {}, expected > 0", a, c.n_head);
  c.head_dim = m.get_int(a + "attention.key_length", c.n_embd / c.n_head);
  if (m.has(a + "attention.value_length") && m.get_int(a + "attention.value_length") != c.head_dim)
    fail("{}attention.value_length {} differs from key_length {}; brisk needs them equal", a,
         m.get_int(a + "attention.value_length"), c.head_dim);
  c.n_ctx_train = m.get_int(a + "context_length", 0);
  c.norm_eps = static_cast<float>(m.get_float(a + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_base = static_cast<float>(m.get_float(a + "rope.freq_base", 10000.0));

  // vocab_size is optional in GGUF; the embedding table always knows it.
  if (m.has(a + "vocab_size")) {
    c.n_vocab = m.get_int(a + "vocab_size");
  } else if (const TensorView* e = src.find("token_embd.weight")) {
    c.n_vocab = e->ne[1];
  } else {
    fail("model has neither {}vocab_size nor a token_embd.weight tensor", a);
  }

  // Sizes up to 2^24 (the largest real ones are ~10^5-10^6), so that their products, such as
  // head_count x key_length, cannot overflow.
  constexpr int64_t kMaxSize = int64_t{1} << 24;
  for (auto [name, v] : {std::pair{"block_count", c.n_layer}, {"embedding_length", c.n_embd},
                         {"feed_forward_length", c.n_ff}, {"attention.head_count", c.n_head},
                         {"attention.head_count_kv", c.n_head_kv}, {"attention.key_length", c.head_dim},
                         {"vocab_size", c.n_vocab}})
    if (v <= 0 || v > kMaxSize) fail("{}{} is {}, expected 1..{}", a, name, v, kMaxSize);
  if (c.n_ctx_train < 0 || c.n_ctx_train > (int64_t{1} << 31) - 1)
    fail("{}context_length is {}, expected 0 (unknown)..2^31-1", a, c.n_ctx_train);
  if (!(c.norm_eps >= 0.f && c.norm_eps < 1.f))
    fail("{}attention.layer_norm_rms_epsilon is {}, expected 0 <= eps < 1", a, c.norm_eps);
  if (!(c.rope_base > 0.f && c.rope_base < 1e30f))
    fail("{}rope.freq_base is {}, expected a positive finite number", a, c.rope_base);
  if (c.n_head % c.n_head_kv != 0)
    fail("{}attention.head_count {} is not a multiple of head_count_kv {}", a, c.n_head, c.n_head_kv);
  if (c.head_dim % 2 != 0) fail("{}attention.key_length {} must be even for RoPE", a, c.head_dim);

  c.rope_neox = src.hf_layout || c.arch != Arch::Llama;
  c.qkv_bias = c.arch == Arch::Qwen2;
  c.qk_norm = c.arch == Arch::Qwen3;
  return c;
}

}  // namespace brisk
