// brisk synth --shape S --type T OUT.gguf: a random-weight GGUF of a real model's shape,
// for speed and memory measurements where the real weights cannot be downloaded. The
// vocabulary (and so the embedding size) comes from a GGUF vocab file, by default the
// 32,000-token Llama SentencePiece vocab vendored under tests/fixtures/vocab.
#include <cmath>
#include <cstdio>
#include <deque>
#include <map>

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

int cmd_synth(int argc, char** argv) {
  CLI::App app{"Write a random-weight GGUF of a real model's shape"};
  std::string shape_name, type_name = "q4_0", out_path,
                          vocab = std::string(BRISK_SOURCE_DIR) + "/tests/fixtures/vocab/ggml-vocab-llama-spm.gguf";
  uint64_t seed = 1;
  app.add_option("--shape", shape_name, "tiny|llama-3.2-1b|llama-3.1-8b|qwen2.5-7b")->required();
  app.add_option("--type", type_name, "f32|f16|bf16|q8_0|q4_0|q4_k|q6_k");
  app.add_option("--seed", seed, "random seed");
  app.add_option("--vocab", vocab, "GGUF file whose tokenizer.* metadata is copied");
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
  return 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("synth", "write a random-weight GGUF of a real model shape", brisk::cmd_synth);
