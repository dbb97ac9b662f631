// brisk synth --shape S --type T OUT.gguf: a random-weight GGUF of a real model's shape,
// for speed and memory measurements where the real weights cannot be downloaded. The
// vocabulary (and so the embedding size) comes from a GGUF vocab file, by default the
// 32,000-token Llama SentencePiece vocab vendored under tests/fixtures/vocab. Every
// shape is written as GGUF architecture `llama` (no q/k/v biases, also for the qwen2.5-7b
// shape, whose sizes it copies), q/k rows in GGUF's interleaved RoPE order.
// --hf-out DIR also writes the same model as a Hugging Face folder (LlamaForCausalLM
// config.json + bf16 safetensors, sharded with model.safetensors.index.json above 4 GB):
// each tensor is the GGUF tensor dequantized and rounded to bf16 (exact for --type bf16),
// q/k rows permuted back to rotate-half order. No tokenizer files: the folder is for
// speed measurements (token ids in, logits out), e.g. a transformers peer.
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "command.h"
#include "format/gguf.h"
#include "options.h"
#include "tensor/quant.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace brisk {
namespace {

struct Shape {
  int64_t n_layer, n_embd, n_head, n_head_kv, n_ff, n_ctx;
  float rope_base;
};

const std::map<std::string, Shape>& shapes() {
  static const std::map<std::string, Shape> m = {
      {"tiny", {8, 384, 6, 2, 1024, 2048, 10000.0f}},
      {"llama-3.2-1b", {16, 2048, 32, 8, 8192, 131072, 500000.0f}},
      {"llama-3.1-8b", {32, 4096, 32, 8, 14336, 131072, 500000.0f}},
      {"qwen2.5-7b", {28, 3584, 28, 4, 18944, 32768, 1000000.0f}},
  };
  return m;
}

// Normal(0, std) draws from a per-row splitmix64 stream (Box-Muller), so the file does
// not depend on the thread count.
void fill_normal(float* out, int64_t n, uint64_t seed, float std) {
  uint64_t s = seed;
  auto next = [&] {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return ((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
  };
  for (int64_t i = 0; i < n; i += 2) {
    double u1 = next() + 1e-300, u2 = next();
    double r = std::sqrt(-2 * std::log(u1)) * std;
    out[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
  }
}

uint32_t file_type_of(DType t) {  // llama.cpp's general.file_type for an all-one-type file
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q8_0: return 7;
    case DType::Q4_K: return 14;
    case DType::Q6_K: return 18;
    case DType::BF16: return 32;
    default: return 0;
  }
}

// One tensor of the HF folder: its name, the GGUF tensor it comes from, and for q/k the
// number of heads whose rows go back from interleaved to rotate-half order (0: none).
struct HfTensor {
  std::string name;
  const TensorView* src;
  int64_t heads;
  size_t nbytes() const { return static_cast<size_t>(src->elements()) * 2; }
};

// The bf16 bytes of one HF tensor: HF row h*d + i + p*d/2 is GGUF row h*d + 2i + p.
void hf_tensor_bytes(const HfTensor& t, std::vector<uint16_t>& out) {
  const TensorView& v = *t.src;
  const int64_t cols = v.ne[0], rows = v.rows();
  out.resize(static_cast<size_t>(cols * rows));
  const int64_t d = t.heads > 0 ? rows / t.heads : 0;
  ThreadPool::global().parallel_for(rows, [&](int64_t b, int64_t e, int) {
    std::vector<float> f(cols);
    for (int64_t r = b; r < e; ++r) {
      int64_t src_row = r;
      if (d > 0) {
        int64_t h = r / d, j = r % d, p = j / (d / 2), i = j % (d / 2);
        src_row = h * d + 2 * i + p;
      }
      dequantize_row(v.type, v.row(src_row), f.data(), cols);
      for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = fp32_to_bf16(f[c]);
    }
  });
}

void write_safetensors(const std::filesystem::path& file, const std::vector<const HfTensor*>& ts) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  size_t off = 0;
  for (const HfTensor* t : ts) {
    std::vector<int64_t> shape;
    for (int k = t->src->n_dims - 1; k >= 0; --k) shape.push_back(t->src->ne[k]);  // PyTorch order
    header[t->name] = {{"dtype", "BF16"}, {"shape", shape}, {"data_offsets", {off, off + t->nbytes()}}};
    off += t->nbytes();
  }
  std::string h = header.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  std::ofstream f(file, std::ios::binary);
  if (!f) fail("--hf-out: cannot write '{}'", file.string());
  uint64_t n = h.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(h.data(), static_cast<std::streamsize>(h.size()));
  std::vector<uint16_t> buf;
  for (const HfTensor* t : ts) {
    hf_tensor_bytes(*t, buf);
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size() * 2));
  }
  if (!f.flush()) fail("--hf-out: error writing '{}'", file.string());
}

void write_hf_folder(const std::string& dir, const Shape& S, int64_t n_vocab, const GgufMetadata& meta,
                     const std::vector<TensorView>& tensors) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  std::map<std::string, const TensorView*> by_name;
  for (const auto& t : tensors) by_name[t.name] = &t;
  std::vector<HfTensor> hf;
  auto add = [&](const std::string& hf_name, const std::string& gguf_name, int64_t heads = 0) {
    hf.push_back({hf_name, by_name.at(gguf_name), heads});
  };
  add("model.embed_tokens.weight", "token_embd.weight");
  for (int64_t l = 0; l < S.n_layer; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".", g = "blk." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", g + "attn_norm.weight");
    add(p + "self_attn.q_proj.weight", g + "attn_q.weight", S.n_head);
    add(p + "self_attn.k_proj.weight", g + "attn_k.weight", S.n_head_kv);
    add(p + "self_attn.v_proj.weight", g + "attn_v.weight");
    add(p + "self_attn.o_proj.weight", g + "attn_output.weight");
    add(p + "post_attention_layernorm.weight", g + "ffn_norm.weight");
    add(p + "mlp.gate_proj.weight", g + "ffn_gate.weight");
    add(p + "mlp.up_proj.weight", g + "ffn_up.weight");
    add(p + "mlp.down_proj.weight", g + "ffn_down.weight");
  }
  add("model.norm.weight", "output_norm.weight");
  add("lm_head.weight", "output.weight");

  // Shards of at most 4 GB (one file when the whole model fits).
  constexpr size_t kShard = size_t{4} << 30;
  std::vector<std::vector<const HfTensor*>> shards(1);
  size_t total = 0, in_shard = 0;
  for (const auto& t : hf) {
    if (in_shard > 0 && in_shard + t.nbytes() > kShard) shards.emplace_back(), in_shard = 0;
    shards.back().push_back(&t);
    in_shard += t.nbytes();
    total += t.nbytes();
  }
  if (shards.size() == 1) {
    write_safetensors(fs::path(dir) / "model.safetensors", shards[0]);
  } else {
    nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", nlohmann::ordered_json::object()}};
    for (size_t i = 0; i < shards.size(); ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
      write_safetensors(fs::path(dir) / name, shards[i]);
      for (const HfTensor* t : shards[i]) index["weight_map"][t->name] = name;
    }
    std::ofstream(fs::path(dir) / "model.safetensors.index.json") << index.dump(2) << "\n";
  }
  const int64_t head_dim = S.n_embd / S.n_head;
  nlohmann::ordered_json cfg = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_size", S.n_embd},
      {"intermediate_size", S.n_ff},
      {"num_hidden_layers", S.n_layer},
      {"num_attention_heads", S.n_head},
      {"num_key_value_heads", S.n_head_kv},
      {"head_dim", head_dim},
      {"hidden_act", "silu"},
      {"max_position_embeddings", S.n_ctx},
      {"rms_norm_eps", 1e-5},
      {"rope_theta", S.rope_base},
      {"rope_scaling", nullptr},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"tie_word_embeddings", false},
      {"vocab_size", n_vocab},
      {"torch_dtype", "bfloat16"},
  };
  if (meta.has("tokenizer.ggml.bos_token_id")) cfg["bos_token_id"] = meta.get_int("tokenizer.ggml.bos_token_id");
  if (meta.has("tokenizer.ggml.eos_token_id")) cfg["eos_token_id"] = meta.get_int("tokenizer.ggml.eos_token_id");
  std::ofstream(fs::path(dir) / "config.json") << cfg.dump(2) << "\n";
  std::fprintf(stderr, "wrote %s (config.json + %zu safetensors file%s, %.2f GB bf16)\n", dir.c_str(),
               shards.size(), shards.size() > 1 ? "s" : "", total / 1e9);
}

int cmd_synth(int argc, char** argv) {
  CLI::App app{"Write a random-weight GGUF of a real model's shape"};
  std::string shape_name, type_name = "q4_0", out_path,
                          vocab = std::string(BRISK_SOURCE_DIR) + "/tests/fixtures/vocab/ggml-vocab-llama-spm.gguf";
  std::string hf_out;
  uint64_t seed = 1;
  app.add_option("--shape", shape_name, "tiny|llama-3.2-1b|llama-3.1-8b|qwen2.5-7b")->required();
  app.add_option("--type", type_name, "f32|f16|bf16|q8_0|q4_0|q4_k|q6_k");
  app.add_option("--seed", seed, "random seed");
  app.add_option("--vocab", vocab, "GGUF file whose tokenizer.* metadata is copied");
  app.add_option("--hf-out", hf_out, "also write the same weights as a Hugging Face folder (bf16 safetensors)");
  app.add_option("out", out_path, "output .gguf")->required();
  CLI11_PARSE(app, argc, argv);

  auto it = shapes().find(shape_name);
  if (it == shapes().end()) fail("--shape: unknown shape '{}'", shape_name);
  const Shape& S = it->second;
  auto type = dtype_from_name(type_name);
  if (!type || !info(*type).supported) fail("--type: unknown or unsupported type '{}'", type_name);

  auto vf = GgufFile::open(vocab);
  GgufMetadata meta;
  for (const auto& [k, v] : vf->metadata().kv)
    if (k.rfind("tokenizer.", 0) == 0) meta.set(k, v);
  const int64_t n_vocab = static_cast<int64_t>(meta.get_string_array("tokenizer.ggml.tokens").size());
  const int64_t head_dim = S.n_embd / S.n_head;
  const std::string a = "llama";
  meta.set("general.architecture", GgufValue::of_str(a));
  meta.set("general.name", GgufValue::of_str("synthetic " + shape_name));
  meta.set(a + ".block_count", GgufValue::of_u32(uint32_t(S.n_layer)));
  meta.set(a + ".context_length", GgufValue::of_u32(uint32_t(S.n_ctx)));
  meta.set(a + ".embedding_length", GgufValue::of_u32(uint32_t(S.n_embd)));
  meta.set(a + ".feed_forward_length", GgufValue::of_u32(uint32_t(S.n_ff)));
  meta.set(a + ".attention.head_count", GgufValue::of_u32(uint32_t(S.n_head)));
  meta.set(a + ".attention.head_count_kv", GgufValue::of_u32(uint32_t(S.n_head_kv)));
  meta.set(a + ".attention.layer_norm_rms_epsilon", GgufValue::of_f32(1e-5f));
  meta.set(a + ".rope.freq_base", GgufValue::of_f32(S.rope_base));
  meta.set(a + ".rope.dimension_count", GgufValue::of_u32(uint32_t(head_dim)));
  meta.set(a + ".vocab_size", GgufValue::of_u32(uint32_t(n_vocab)));
  meta.set("general.quantization_version", GgufValue::of_u32(2));
  meta.set("general.file_type", GgufValue::of_u32(file_type_of(*type)));

  std::deque<std::vector<uint8_t>> bufs;
  std::vector<TensorView> tensors;
  uint64_t tensor_seed = seed * 1000003;
  auto add = [&](const std::string& name, int64_t cols, int64_t rows, bool is_norm) {
    TensorView t;
    t.name = name;
    t.type = is_norm ? DType::F32 : *type;
    t.n_dims = rows == 1 ? 1 : 2;
    t.ne = {cols, rows, 1, 1};
    auto& buf = bufs.emplace_back(t.nbytes());
    uint64_t ts = ++tensor_seed;
    ThreadPool::global().parallel_for(rows, [&](int64_t b, int64_t e, int) {
      std::vector<float> row(cols);
      for (int64_t r = b; r < e; ++r) {
        if (is_norm) std::fill(row.begin(), row.end(), 1.0f);
        else fill_normal(row.data(), cols, ts * 0x100000001b3ull + r, 0.02f);
        quantize_row(t.type, row.data(), buf.data() + r * t.row_size(), cols);
      }
    });
    t.data = buf.data();
    tensors.push_back(t);
  };
  add("token_embd.weight", S.n_embd, n_vocab, false);
  for (int64_t l = 0; l < S.n_layer; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", S.n_embd, 1, true);
    add(p + "attn_q.weight", S.n_embd, S.n_head * head_dim, false);
    add(p + "attn_k.weight", S.n_embd, S.n_head_kv * head_dim, false);
    add(p + "attn_v.weight", S.n_embd, S.n_head_kv * head_dim, false);
    add(p + "attn_output.weight", S.n_head * head_dim, S.n_embd, false);
    add(p + "ffn_norm.weight", S.n_embd, 1, true);
    add(p + "ffn_gate.weight", S.n_embd, S.n_ff, false);
    add(p + "ffn_up.weight", S.n_embd, S.n_ff, false);
    add(p + "ffn_down.weight", S.n_ff, S.n_embd, false);
  }
  add("output_norm.weight", S.n_embd, 1, true);
  add("output.weight", S.n_embd, n_vocab, false);
  write_gguf(out_path, meta, tensors);
  std::fprintf(stderr, "wrote %s (%s, %s)\n", out_path.c_str(), shape_name.c_str(), type_name.c_str());
  if (!hf_out.empty()) write_hf_folder(hf_out, S, n_vocab, meta, tensors);
  return 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("synth", "write a random-weight GGUF of a real model shape", brisk::cmd_synth);
