// Hugging Face folders -> ModelSource: config translation, tensor names, sharding.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "format/hf_config.h"
#include "format/model_source.h"
#include "util/error.h"

namespace brisk {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

const std::string kNano = BRISK_SOURCE_DIR "/tests/fixtures/brisk-nano";

TEST(HfSource, BriskNanoFolder) {
  ModelSource s = load_model_source(kNano);
  const GgufMetadata& m = s.meta;
  EXPECT_TRUE(s.hf_layout);
  EXPECT_EQ(m.get_string("general.architecture"), "llama");
  EXPECT_EQ(m.get_string("general.name"), "brisk-nano");
  EXPECT_EQ(m.get_int("llama.context_length"), 2048);
  EXPECT_EQ(m.get_int("llama.embedding_length"), 256);
  EXPECT_EQ(m.get_int("llama.block_count"), 4);
  EXPECT_EQ(m.get_int("llama.feed_forward_length"), 704);
  EXPECT_EQ(m.get_int("llama.attention.head_count"), 4);
  EXPECT_EQ(m.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(m.get_int("llama.attention.key_length"), 64);
  EXPECT_EQ(m.get_int("llama.attention.value_length"), 64);
  EXPECT_EQ(m.get_int("llama.rope.dimension_count"), 64);
  EXPECT_EQ(m.get_int("llama.vocab_size"), 16384);
  EXPECT_FLOAT_EQ(static_cast<float>(m.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(m.get_float("llama.rope.freq_base"), 10000.0);  // from rope_parameters
  EXPECT_TRUE(m.get_bool("brisk.tie_word_embeddings", false));
  EXPECT_EQ(m.get_int("tokenizer.ggml.bos_token_id"), 0);
  EXPECT_EQ(m.get_int("tokenizer.ggml.eos_token_id"), 0);
  EXPECT_FALSE(m.has("tokenizer.ggml.padding_token_id"));  // null in config.json
  EXPECT_FALSE(m.has("llama.rope.scaling.type"));

  EXPECT_EQ(s.tensors.size(), 2u + 4u * 9u);
  EXPECT_EQ(s.find("output.weight"), nullptr);  // tied
  EXPECT_EQ(s.find("rope_freqs.weight"), nullptr);
  const TensorView* e = s.find("token_embd.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, DType::F16);
  EXPECT_EQ(e->n_dims, 2);
  EXPECT_EQ(e->ne[0], 256);
  EXPECT_EQ(e->ne[1], 16384);
  const TensorView* k = s.find("blk.0.attn_k.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->ne[0], 256);
  EXPECT_EQ(k->ne[1], 128);
  const TensorView* d = s.find("blk.3.ffn_down.weight");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->ne[0], 704);
  EXPECT_EQ(d->ne[1], 256);
  for (const char* n : {"blk.2.attn_norm.weight", "blk.2.attn_q.weight", "blk.2.attn_v.weight",
                        "blk.2.attn_output.weight", "blk.2.ffn_norm.weight",
                        "blk.2.ffn_gate.weight", "blk.2.ffn_up.weight", "output_norm.weight"})
    EXPECT_NE(s.find(n), nullptr) << n;

  // Zero copy: the embedding's first bytes are those at the safetensors data start.
  std::ifstream in(kNano + "/model.safetensors", std::ios::binary);
  uint64_t hlen = 0;
  in.read(reinterpret_cast<char*>(&hlen), 8);
  in.seekg(static_cast<std::streamoff>(8 + hlen));
  char first[16];
  in.read(first, 16);
  EXPECT_EQ(std::memcmp(first, e->data, 16), 0);

  EXPECT_NE(s.tokenizer_json.find("\"model\""), std::string::npos);
  EXPECT_NE(s.tokenizer_config_json.find("endoftext"), std::string::npos);
}

TEST(HfSource, GgufFileThroughModelSource) {
  std::string p = BRISK_SOURCE_DIR "/models/brisk-tiny-q8_0.gguf";
  if (!fs::exists(p)) GTEST_SKIP() << p << " not present";
  ModelSource s = load_model_source(p);
  EXPECT_FALSE(s.hf_layout);
  EXPECT_EQ(s.meta.get_string("general.architecture"), "llama");
  EXPECT_EQ(s.tensors.size(), 74u);
  ASSERT_NE(s.find("token_embd.weight"), nullptr);
  EXPECT_EQ(s.find("token_embd.weight")->type, DType::Q8_0);
  EXPECT_TRUE(s.tokenizer_json.empty());
}

TEST(HfSource, MissingPathIsAnError) {
  try {
    load_model_source("/nonexistent/model");
    FAIL();
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "/nonexistent/model");
  }
}

TEST(HfNames, Mapping) {
  EXPECT_EQ(hf_tensor_to_gguf("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(hf_tensor_to_gguf("model.norm.weight"), "output_norm.weight");
  EXPECT_EQ(hf_tensor_to_gguf("lm_head.weight"), "output.weight");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.0.input_layernorm.weight"), "blk.0.attn_norm.weight");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.11.self_attn.q_proj.bias"), "blk.11.attn_q.bias");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.2.self_attn.k_proj.weight"), "blk.2.attn_k.weight");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.2.self_attn.v_proj.bias"), "blk.2.attn_v.bias");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.2.self_attn.o_proj.weight"), "blk.2.attn_output.weight");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.5.self_attn.q_norm.weight"), "blk.5.attn_q_norm.weight");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.5.self_attn.k_norm.weight"), "blk.5.attn_k_norm.weight");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.7.post_attention_layernorm.weight"), "blk.7.ffn_norm.weight");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.7.mlp.gate_proj.weight"), "blk.7.ffn_gate.weight");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.7.mlp.up_proj.weight"), "blk.7.ffn_up.weight");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.7.mlp.down_proj.weight"), "blk.7.ffn_down.weight");
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.0.self_attn.rotary_emb.inv_freq"), std::nullopt);
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.x.mlp.up_proj.weight"), std::nullopt);
  EXPECT_EQ(hf_tensor_to_gguf("model.layers..mlp.up_proj.weight"), std::nullopt);
  EXPECT_EQ(hf_tensor_to_gguf("model.layers.1"), std::nullopt);
  EXPECT_EQ(hf_tensor_to_gguf(".weight"), std::nullopt);
}

json base_config(const char* arch) {
  return json{{"architectures", {arch}}, {"hidden_size", 512}, {"num_attention_heads", 8},
              {"num_hidden_layers", 2}, {"intermediate_size", 1024}, {"vocab_size", 1000},
              {"max_position_embeddings", 4096}, {"rms_norm_eps", 1e-6}};
}

TEST(HfConfig, Qwen2AndMistral) {
  json q = base_config("Qwen2ForCausalLM");
  q["rope_theta"] = 1000000.0;
  q["num_key_value_heads"] = 2;
  q["eos_token_id"] = json{151645, 151643};
  q["rope_scaling"] = nullptr;
  HfConfig h = translate_hf_config(q, json(), "config.json");
  EXPECT_EQ(h.meta.get_string("general.architecture"), "qwen2");
  EXPECT_EQ(h.meta.get_float("qwen2.rope.freq_base"), 1000000.0);
  EXPECT_EQ(h.meta.get_int("qwen2.attention.head_count_kv"), 2);
  EXPECT_EQ(h.meta.get_int("qwen2.attention.key_length"), 64);  // 512 / 8
  EXPECT_EQ(h.meta.get_int("tokenizer.ggml.eos_token_id"), 151645);
  EXPECT_EQ(h.meta.get_int_array("brisk.eos_token_ids"), (std::vector<int64_t>{151645, 151643}));
  EXPECT_FALSE(h.meta.get_bool("brisk.tie_word_embeddings", true));
  EXPECT_TRUE(h.rope_freqs.empty());

  json m = base_config("MistralForCausalLM");
  m["head_dim"] = nullptr;
  HfConfig hm = translate_hf_config(m, json{{"eos_token_id", 2}, {"bos_token_id", 1}}, "c.json");
  EXPECT_EQ(hm.meta.get_string("general.architecture"), "llama");
  EXPECT_EQ(hm.meta.get_float("llama.rope.freq_base"), 10000.0);  // absent -> default
  EXPECT_EQ(hm.meta.get_int("llama.attention.head_count_kv"), 8);
  EXPECT_EQ(hm.meta.get_int("llama.attention.key_length"), 64);
  EXPECT_EQ(hm.meta.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(hm.meta.get_int("tokenizer.ggml.eos_token_id"), 2);

  json q3 = base_config("Qwen3ForCausalLM");
  q3["head_dim"] = 128;
  HfConfig h3 = translate_hf_config(q3, json(), "config.json");
  EXPECT_EQ(h3.meta.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(h3.meta.get_int("qwen3.attention.key_length"), 128);
  EXPECT_EQ(h3.meta.get_int("qwen3.context_length"), 4096);
}

// Llama 3.1 8B's settings; the divisors below are those of its rope_freqs tensor.
TEST(HfConfig, Llama3RopeScaling) {
  json c = base_config("LlamaForCausalLM");
  c["hidden_size"] = 4096;
  c["num_attention_heads"] = 32;
  c["rope_theta"] = 500000.0;
  c["rope_scaling"] = json{{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0},
                           {"original_max_position_embeddings", 8192}};
  HfConfig h = translate_hf_config(c, json(), "config.json");
  ASSERT_EQ(h.rope_freqs.size(), 64u);
  for (int i = 0; i < 29; ++i) EXPECT_EQ(h.rope_freqs[i], 1.0f) << i;
  EXPECT_NEAR(h.rope_freqs[29], 1.207484, 1e-5);
  EXPECT_NEAR(h.rope_freqs[31], 2.026313, 1e-5);
  EXPECT_NEAR(h.rope_freqs[34], 5.257327, 1e-5);
  for (int i = 35; i < 64; ++i) EXPECT_EQ(h.rope_freqs[i], 8.0f) << i;

  // transformers 5: the same under rope_parameters, with rope_theta inside it
  json t5 = c;
  t5.erase("rope_scaling");
  t5.erase("rope_theta");
  t5["rope_parameters"] = c["rope_scaling"];
  t5["rope_parameters"]["rope_theta"] = 500000.0;
  HfConfig h5 = translate_hf_config(t5, json(), "config.json");
  EXPECT_EQ(h5.rope_freqs, h.rope_freqs);
  EXPECT_EQ(h5.meta.get_float("llama.rope.freq_base"), 500000.0);
}

TEST(HfConfig, LinearScalingAndErrors) {
  json c = base_config("LlamaForCausalLM");
  c["rope_scaling"] = json{{"type", "linear"}, {"factor", 4.0}};
  HfConfig h = translate_hf_config(c, json(), "config.json");
  EXPECT_EQ(h.meta.get_string("llama.rope.scaling.type"), "linear");
  EXPECT_EQ(h.meta.get_float("llama.rope.scaling.factor"), 4.0);

  auto err = [](json j) {
    try {
      translate_hf_config(j, json(), "cfg/config.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  json bad = base_config("GPT2LMHeadModel");
  EXPECT_HAS(err(bad), "cfg/config.json: architecture 'GPT2LMHeadModel' is not supported");
  bad = base_config("LlamaForCausalLM");
  bad.erase("hidden_size");
  EXPECT_HAS(err(bad), "cfg/config.json: key 'hidden_size' is missing");
  bad = base_config("LlamaForCausalLM");
  bad["num_hidden_layers"] = "two";
  EXPECT_HAS(err(bad), "key 'num_hidden_layers' must be a positive integer, found \"two\"");
  bad = base_config("LlamaForCausalLM");
  bad["num_key_value_heads"] = 3;
  EXPECT_HAS(err(bad), "num_key_value_heads 3");
  bad = base_config("LlamaForCausalLM");
  bad["rope_scaling"] = json{{"rope_type", "dynamic"}, {"factor", 2.0}};
  EXPECT_HAS(err(bad), "rope scaling type 'dynamic' is not supported");
  EXPECT_HAS(err(json::array()), "not a JSON object");
}

// A folder sharded in two files with an index, plus a llama3 rope tensor.
class ShardedFolder : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("brisk-shards-" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
  }
  // One F32 tensor of shape [rows, cols] per (name, rows, cols).
  void shard(const std::string& file, std::vector<std::tuple<std::string, int, int>> ts) {
    json h;
    size_t off = 0;
    for (auto& [n, r, c] : ts) {
      size_t bytes = static_cast<size_t>(r) * c * 4;
      h[n] = json{{"dtype", "F32"}, {"shape", {r, c}}, {"data_offsets", {off, off + bytes}}};
      off += bytes;
    }
    std::string hs = h.dump();
    uint64_t n = hs.size();
    std::string out(reinterpret_cast<const char*>(&n), 8);
    out += hs;
    out.append(off, '\0');
    write(file, out);
  }
};

TEST_F(ShardedFolder, LoadsAllShards) {
  json c = base_config("LlamaForCausalLM");
  c["hidden_size"] = 64;
  c["num_attention_heads"] = 4;
  c["rope_parameters"] = json{{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 8192},
                              {"rope_theta", 500000.0}};
  write("config.json", c.dump());
  shard("model-00001-of-00002.safetensors",
        {{"model.embed_tokens.weight", 10, 64}, {"model.layers.0.self_attn.q_proj.weight", 64, 64}});
  shard("model-00002-of-00002.safetensors",
        {{"lm_head.weight", 10, 64}, {"model.layers.0.self_attn.rotary_emb.inv_freq", 1, 8}});
  json idx;
  idx["weight_map"] = json{{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                           {"model.layers.0.self_attn.q_proj.weight", "model-00001-of-00002.safetensors"},
                           {"lm_head.weight", "model-00002-of-00002.safetensors"}};
  write("model.safetensors.index.json", idx.dump());

  ModelSource s = load_model_source(dir.string());
  EXPECT_EQ(s.tensors.size(), 4u);  // 3 weights + rope_freqs; inv_freq ignored
  ASSERT_NE(s.find("output.weight"), nullptr);
  EXPECT_EQ(s.find("output.weight")->ne[0], 64);
  EXPECT_EQ(s.find("output.weight")->ne[1], 10);
  ASSERT_NE(s.find("blk.0.attn_q.weight"), nullptr);
  const TensorView* rf = s.find("rope_freqs.weight");
  ASSERT_NE(rf, nullptr);
  EXPECT_EQ(rf->type, DType::F32);
  EXPECT_EQ(rf->ne[0], 8);  // head_dim 16 / 2
  EXPECT_EQ(static_cast<const float*>(rf->data)[0], 1.0f);
  EXPECT_EQ(static_cast<const float*>(rf->data)[7], 8.0f);
  EXPECT_TRUE(s.tokenizer_json.empty());

  // the index names a tensor its shard does not have
  idx["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
  write("model.safetensors.index.json", idx.dump());
  try {
    load_model_source(dir.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "tensor 'model.norm.weight' listed in model.safetensors.index.json is not in 'model-00002-of-00002.safetensors'");
  }
  idx["weight_map"]["model.norm.weight"] = "../evil.safetensors";
  write("model.safetensors.index.json", idx.dump());
  EXPECT_THROW(load_model_source(dir.string()), Error);
}

TEST_F(ShardedFolder, MissingWeightsAndBadJson) {
  write("config.json", base_config("LlamaForCausalLM").dump());
  try {
    load_model_source(dir.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "no model.safetensors or model.safetensors.index.json");
  }
  write("config.json", "{ nope");
  try {
    load_model_source(dir.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "config.json: not valid JSON");
  }
}

}  // namespace
}  // namespace brisk
