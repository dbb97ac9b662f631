// config.json translation. Key names follow llama.cpp (src/llama-arch.cpp): a model
// converted by llama.cpp and the same HF folder loaded directly give the same keys.
#include "format/hf_config.h"

#include <cmath>

#include "util/error.h"

namespace brisk {

namespace {

using json = nlohmann::json;

std::string arch_of(const json& c, const std::string& file) {
  auto a = c.find("architectures");
  if (a == c.end() || !a->is_array() || a->empty() || !(*a)[0].is_string())
    fail("{}: 'architectures' must be a non-empty list of strings", file);
  std::string hf = (*a)[0].get<std::string>();
  if (hf == "LlamaForCausalLM" || hf == "MistralForCausalLM") return "llama";
  if (hf == "Qwen2ForCausalLM") return "qwen2";
  if (hf == "Qwen3ForCausalLM") return "qwen3";
  fail("{}: architecture '{}' is not supported (expected LlamaForCausalLM, MistralForCausalLM, "
       "Qwen2ForCausalLM or Qwen3ForCausalLM)",
       file, hf);
}

// A required positive integer.
int64_t need_int(const json& c, const char* key, const std::string& file) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) fail("{}: key '{}' is missing", file, key);
  if (!it->is_number_integer() || it->get<int64_t>() <= 0)
    fail("{}: key '{}' must be a positive integer, found {}", file, key, it->dump());
  return it->get<int64_t>();
}

int64_t opt_int(const json& c, const char* key, int64_t def, const std::string& file) {
  auto it = c.find(key);
  return it == c.end() || it->is_null() ? def : need_int(c, key, file);
}

double opt_num(const json& c, const char* key, double def, const std::string& file) {
  auto it = c.find(key);
  if (it == c.end() || it->is_null()) return def;
  if (!it->is_number()) fail("{}: key '{}' must be a number, found {}", file, key, it->dump());
  return it->get<double>();
}

// Rope parameters live in `rope_scaling` (transformers <= 4) or `rope_parameters`
// (transformers 5, which also moves rope_theta there).
const json* rope_block(const json& c, const char* key) {
  auto it = c.find(key);
  return it != c.end() && it->is_object() ? &*it : nullptr;
}

std::string rope_type(const json& r) {
  for (const char* k : {"rope_type", "type"}) {
    auto it = r.find(k);
    if (it != r.end() && it->is_string()) return it->get<std::string>();
  }
  return "default";
}

// A token id field that may be an int, a list of ints or null.
std::vector<int64_t> token_ids(const json& j, const char* key) {
  std::vector<int64_t> out;
  auto it = j.find(key);
  if (it == j.end()) return out;
  if (it->is_number_integer()) out.push_back(it->get<int64_t>());
  if (it->is_array())
    for (const auto& x : *it)
      if (x.is_number_integer()) out.push_back(x.get<int64_t>());
  return out;
}

void set_token_ids(GgufMetadata& m, const json& config, const json& generation) {
  for (auto [hf, gg] : {std::pair{"bos_token_id", "tokenizer.ggml.bos_token_id"},
                        std::pair{"eos_token_id", "tokenizer.ggml.eos_token_id"},
                        std::pair{"pad_token_id", "tokenizer.ggml.padding_token_id"}}) {
    // generation_config.json is what generate() obeys, so it wins over config.json.
    std::vector<int64_t> ids = token_ids(generation, hf);
    if (ids.empty()) ids = token_ids(config, hf);
    if (ids.empty() || ids[0] < 0 || ids[0] > UINT32_MAX) continue;
    m.set(gg, GgufValue::of_u32(static_cast<uint32_t>(ids[0])));
    if (std::string_view(hf) == "eos_token_id" && ids.size() > 1) {
      std::vector<int32_t> all(ids.begin(), ids.end());
      m.set("brisk.eos_token_ids", GgufValue::of_i32_array(all));  // every stop id
    }
  }
}

}  // namespace

std::vector<float> llama3_rope_factors(int head_dim, double theta, double factor,
                                       double low_freq_factor, double high_freq_factor,
                                       double original_context) {
  const double kPi = 3.14159265358979323846;
  // Wavelengths (in positions) beyond which a frequency is fully scaled / below which
  // it is left alone; in between, blend linearly in 1/divisor.
  const double low_wavelen = original_context / low_freq_factor;
  const double high_wavelen = original_context / high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < head_dim / 2; ++i) {
    double freq = std::pow(theta, -2.0 * i / head_dim);
    double wavelen = 2 * kPi / freq;
    double div;
    if (wavelen < high_wavelen) {
      div = 1;
    } else if (wavelen > low_wavelen) {
      div = factor;
    } else {
      double smooth =
          (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      div = 1 / ((1 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(div));
  }
  return out;
}

HfConfig translate_hf_config(const json& c, const json& generation, const std::string& file) {
  if (!c.is_object()) fail("{}: not a JSON object", file);
  HfConfig out;
  GgufMetadata& m = out.meta;
  const std::string arch = arch_of(c, file);
  auto key = [&](const char* k) { return arch + "." + k; };
  auto u32 = [](int64_t v) { return GgufValue::of_u32(static_cast<uint32_t>(v)); };

  const int64_t hidden = need_int(c, "hidden_size", file);
  const int64_t heads = need_int(c, "num_attention_heads", file);
  const int64_t kv_heads = opt_int(c, "num_key_value_heads", heads, file);
  const int64_t head_dim = opt_int(c, "head_dim", hidden / heads, file);
  if (hidden > UINT32_MAX || heads > hidden || kv_heads > heads || heads % kv_heads != 0)
    fail("{}: inconsistent sizes: hidden_size {}, num_attention_heads {}, "
         "num_key_value_heads {}",
         file, hidden, heads, kv_heads);

  m.set("general.architecture", GgufValue::of_str(arch));
  m.set(key("context_length"), u32(opt_int(c, "max_position_embeddings", 2048, file)));
  m.set(key("embedding_length"), u32(hidden));
  m.set(key("block_count"), u32(need_int(c, "num_hidden_layers", file)));
  m.set(key("feed_forward_length"), u32(need_int(c, "intermediate_size", file)));
  m.set(key("attention.head_count"), u32(heads));
  m.set(key("attention.head_count_kv"), u32(kv_heads));
  m.set(key("attention.key_length"), u32(head_dim));
  m.set(key("attention.value_length"), u32(head_dim));
  m.set(key("rope.dimension_count"), u32(head_dim));
  m.set(key("vocab_size"), u32(need_int(c, "vocab_size", file)));
  m.set(key("attention.layer_norm_rms_epsilon"),
        GgufValue::of_f32(static_cast<float>(opt_num(c, "rms_norm_eps", 1e-6, file))));
  bool tie = c.contains("tie_word_embeddings") && c["tie_word_embeddings"].is_boolean() &&
             c["tie_word_embeddings"].get<bool>();
  m.set("brisk.tie_word_embeddings", GgufValue::of_bool(tie));

  const json* params = rope_block(c, "rope_parameters");
  const json* scaling = rope_block(c, "rope_scaling");
  if (!scaling) scaling = params;
  double theta = opt_num(c, "rope_theta", params ? opt_num(*params, "rope_theta", 10000, file)
                                                 : 10000, file);
  m.set(key("rope.freq_base"), GgufValue::of_f32(static_cast<float>(theta)));

  if (scaling) {
    const std::string type = rope_type(*scaling);
    const double factor = opt_num(*scaling, "factor", 1, file);
    const double orig = opt_num(*scaling, "original_max_position_embeddings", 0, file);
    if (type == "llama3") {
      double low = opt_num(*scaling, "low_freq_factor", 1, file);
      double high = opt_num(*scaling, "high_freq_factor", 4, file);
      if (factor <= 0 || orig <= 0 || low <= 0 || high <= low)
        fail("{}: llama3 rope scaling needs factor > 0, original_max_position_embeddings > 0 "
             "and 0 < low_freq_factor < high_freq_factor",
             file);
      out.rope_freqs = llama3_rope_factors(static_cast<int>(head_dim), theta, factor, low, high, orig);
    } else if (type == "linear" || type == "yarn") {
      m.set(key("rope.scaling.type"), GgufValue::of_str(type));
      m.set(key("rope.scaling.factor"), GgufValue::of_f32(static_cast<float>(factor)));
      if (orig > 0)
        m.set(key("rope.scaling.original_context_length"), u32(static_cast<int64_t>(orig)));
    } else if (type != "default") {
      fail("{}: rope scaling type '{}' is not supported (expected default, linear, yarn or "
           "llama3)",
           file, type);
    }
  }
  set_token_ids(m, c, generation.is_object() ? generation : json::object());
  return out;
}

}  // namespace brisk
