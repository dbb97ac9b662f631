// Hugging Face tensor names -> GGUF tensor names (the subset the supported
// architectures use; llama.cpp's converter defines the GGUF side).
#include <array>
#include <charconv>
#include <utility>

#include "format/hf_config.h"

namespace brisk {

namespace {

// Per-layer module paths (without .weight / .bias) and their GGUF names.
constexpr std::array<std::pair<std::string_view, std::string_view>, 13> kLayer{{
    {"input_layernorm", "attn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"post_attention_layernorm", "ffn_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"self_attn.rotary_emb", ""},  // inv_freq buffers: recomputed, not loaded
    {"rotary_emb", ""},
}};

constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kGlobal{{
    {"model.embed_tokens", "token_embd"},
    {"model.norm", "output_norm"},
    {"lm_head", "output"},
}};

}  // namespace

std::optional<std::string> hf_tensor_to_gguf(std::string_view name) {
  std::string_view suffix;
  for (std::string_view s : {".weight", ".bias"})
    if (name.size() > s.size() && name.substr(name.size() - s.size()) == s) suffix = s;
  if (suffix.empty()) return std::nullopt;
  std::string_view base = name.substr(0, name.size() - suffix.size());

  for (auto [hf, gg] : kGlobal)
    if (base == hf) return std::string(gg) + std::string(suffix);

  constexpr std::string_view kLayers = "model.layers.";
  if (base.substr(0, kLayers.size()) != kLayers) return std::nullopt;
  base.remove_prefix(kLayers.size());
  size_t dot = base.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  unsigned layer = 0;
  auto [p, ec] = std::from_chars(base.data(), base.data() + dot, layer);
  if (ec != std::errc() || p != base.data() + dot) return std::nullopt;
  std::string_view module = base.substr(dot + 1);
  for (auto [hf, gg] : kLayer)
    if (module == hf && !gg.empty())
      return "blk." + std::to_string(layer) + "." + std::string(gg) + std::string(suffix);
  return std::nullopt;
}

}  // namespace brisk
