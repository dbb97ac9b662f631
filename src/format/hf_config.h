// Hugging Face config.json -> GGUF metadata keys, named as llama.cpp's converter names
// them, so the model code reads one vocabulary of keys whatever the source format.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/gguf.h"

namespace brisk {

struct HfConfig {
  GgufMetadata meta;
  // Llama-3 rope scaling: head_dim/2 divisors of the RoPE frequencies, to become the
  // `rope_freqs.weight` tensor as llama.cpp's converter makes it; empty otherwise.
  std::vector<float> rope_freqs;
};

// `config` is config.json; `generation` is generation_config.json or null. `file` names
// config.json in error messages. Throws brisk::Error naming the key at fault.
HfConfig translate_hf_config(const nlohmann::json& config, const nlohmann::json& generation,
                             const std::string& file);

// Llama 3.1 frequency scaling: for each of head_dim/2 frequencies theta^(-2i/head_dim),
// the factor the frequency is divided by (1 = untouched, `factor` = fully scaled).
std::vector<float> llama3_rope_factors(int head_dim, double theta, double factor,
                                       double low_freq_factor, double high_freq_factor,
                                       double original_context);

// model.layers.3.self_attn.q_proj.weight -> blk.3.attn_q.weight; nullopt for tensors
// brisk does not use (rotary inv_freq buffers and the like).
std::optional<std::string> hf_tensor_to_gguf(std::string_view hf_name);

}  // namespace brisk
