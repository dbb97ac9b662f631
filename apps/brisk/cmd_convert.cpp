// brisk convert SRC OUT.gguf [--type T]: writes a GGUF file that brisk and llama.cpp load.
// SRC is a Hugging Face folder (or a GGUF file, to re-quantize). From a Hugging Face
// `llama`/`mistral` model the q/k projection rows are permuted per head from rotate-half
// order (pairs i, i+d/2) to the interleaved order (pairs 2i, 2i+1) that GGUF `llama`
// expects, as llama.cpp's converter does; qwen2/qwen3 keep rotate-half (NEOX) in GGUF.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <deque>

#include "command.h"
#include "format/model_source.h"
#include "tensor/quant.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace brisk {
namespace {

// llama.cpp's general.file_type (llama_ftype) for an all-one-type file.
uint32_t file_type_of(DType t) {
  switch (t) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q8_0: return 7;
    case DType::Q4_K: return 14;  // MOSTLY_Q4_K_S
    case DType::Q6_K: return 18;
    case DType::BF16: return 32;
    default: fail("no GGUF file type for {}", dtype_name(t));
  }
}

// Rows of one head [h*d, (h+1)*d): new row 2i <- old row i, new row 2i+1 <- old row i+d/2.
std::vector<float> rotate_half_to_interleaved(const std::vector<float>& w, int64_t row_len,
                                              int64_t n_rows, int64_t n_heads) {
  if (n_heads <= 0 || n_rows % n_heads != 0 || (n_rows / n_heads) % 2 != 0)
    fail("cannot permute q/k rows: {} rows do not split into {} heads of even size", n_rows,
         n_heads);
  int64_t d = n_rows / n_heads;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < d / 2; ++i)
      for (int p = 0; p < 2; ++p) {
        const float* src = &w[(h * d + i + p * d / 2) * row_len];
        std::copy(src, src + row_len, &out[(h * d + 2 * i + p) * row_len]);
      }
  return out;
}

DType storage_type(const TensorView& t, DType want) {
  if (t.n_dims < 2) return DType::F32;  // norms, biases, rope factors
  int64_t block = info(want).block_elems;
  if (t.ne[0] % block == 0) return want;
  DType fallback = t.ne[0] % 32 == 0 ? DType::Q8_0 : DType::F16;
  if (want == DType::F32 || want == DType::BF16) fallback = want;
  std::fprintf(stderr, "note: %s: row length %lld is not a multiple of %lld, stored as %s\n",
               t.name.c_str(), (long long)t.ne[0], (long long)block,
               std::string(dtype_name(fallback)).c_str());
  return fallback;
}

int cmd_convert(int argc, char** argv) {
  CLI::App app{"Convert a Hugging Face folder (or a GGUF file) to a GGUF file"};
  std::string src_path, out_path, type_name = "f16";
  app.add_option("src", src_path, "Hugging Face folder or .gguf file")->required();
  app.add_option("out", out_path, "output .gguf file")->required();
  app.add_option("--type", type_name, "f32|f16|bf16|q8_0|q4_0|q4_k|q6_k");
  CLI11_PARSE(app, argc, argv);

  auto want = dtype_from_name(type_name);
  if (!want || !info(*want).supported || *want == DType::Q8_K)
    fail("--type: unknown or unsupported type '{}' (f32|f16|bf16|q8_0|q4_0|q4_k|q6_k)", type_name);

  ModelSource src = load_model_source(src_path);
  GgufMetadata meta = src.meta;
  std::string arch = meta.get_string("general.architecture");
  if (!meta.has("tokenizer.ggml.model")) {
    if (!src.tokenizer_json.empty())
      add_gguf_tokenizer_metadata(src.tokenizer_json, src.tokenizer_config_json, meta);
    else  // weights-only fixtures: brisk reads them, llama.cpp would refuse them
      std::fprintf(stderr, "warning: %s has no tokenizer.json: the GGUF has no tokenizer\n",
                   src_path.c_str());
  }
  int64_t n_head = meta.get_int(arch + ".attention.head_count");
  int64_t n_head_kv = meta.get_int(arch + ".attention.head_count_kv", n_head);
  int64_t n_embd = meta.get_int(arch + ".embedding_length");
  int64_t head_dim = meta.get_int(arch + ".attention.key_length", n_embd / n_head);
  if (!meta.has(arch + ".rope.dimension_count"))
    meta.set(arch + ".rope.dimension_count", GgufValue::of_u32(uint32_t(head_dim)));
  meta.set("general.file_type", GgufValue::of_u32(file_type_of(*want)));
  meta.set("general.quantization_version", GgufValue::of_u32(2));
  if (!meta.has("general.name")) meta.set("general.name", GgufValue::of_str(src_path));
  const bool permute_qk = src.hf_layout && arch == "llama";

  std::deque<std::vector<uint8_t>> buffers;
  std::vector<TensorView> out;
  for (const TensorView& t : src.tensors) {
    DType st = storage_type(t, *want);
    const int64_t row_len = t.ne[0], n_rows = t.rows();
    std::vector<float> f(static_cast<size_t>(t.elements()));
    for (int64_t r = 0; r < n_rows; ++r) dequantize_row(t.type, t.row(r), &f[r * row_len], row_len);
    bool is_q = t.name.find(".attn_q.") != std::string::npos;
    bool is_k = t.name.find(".attn_k.") != std::string::npos;
    if (permute_qk && (is_q || is_k)) {
      int64_t heads = is_q ? n_head : n_head_kv;
      if (t.n_dims == 1)  // bias: one "row" per output feature
        f = rotate_half_to_interleaved(f, 1, row_len, heads);
      else
        f = rotate_half_to_interleaved(f, row_len, n_rows, heads);
    }
    TensorView v = t;
    v.type = st;
    auto& buf = buffers.emplace_back(v.nbytes());
    for (int64_t r = 0; r < n_rows; ++r)
      quantize_row(st, &f[r * row_len], buf.data() + r * v.row_size(), row_len);
    v.data = buf.data();
    out.push_back(v);
  }
  write_gguf(out_path, meta, out);
  std::fprintf(stderr, "wrote %s: %zu tensors, type %s\n", out_path.c_str(), out.size(),
               type_name.c_str());
  return 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("convert", "convert a Hugging Face folder (or GGUF) to GGUF", brisk::cmd_convert);
