// What a model's files give the rest of brisk, whatever their format: metadata under
// GGUF keys (general.architecture, <arch>.block_count, ...) and tensors under GGUF names
// (token_embd.weight, blk.0.attn_q.weight, ...). A GGUF file is read as it is; a Hugging
// Face folder (config.json, safetensors, tokenizer.json) is translated to the same keys
// and names with its tensors still mapped in place.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/gguf.h"

namespace brisk {

struct ModelSource {
  std::string path;                 // the .gguf file or the HF folder
  GgufMetadata meta;                // GGUF keys; tokenizer.ggml.* only when from GGUF
  std::vector<TensorView> tensors;  // GGUF names, views into mapped files
  // true when q/k projection rows are in Hugging Face order (RoPE rotates halves:
  // pairs (i, i + d/2)); false when in GGUF llama order (pairs (2i, 2i+1)).
  bool hf_layout = false;
  std::string tokenizer_json;       // contents of tokenizer.json (HF folders only)
  std::string tokenizer_config_json;  // contents of tokenizer_config.json, if present
  std::vector<std::shared_ptr<const void>> keep_alive;  // mappings the views point into

  const TensorView* find(std::string_view name) const;
};

// `path` is a .gguf file or a folder with config.json. Throws brisk::Error with the
// file, key or tensor at fault.
ModelSource load_model_source(const std::string& path);

}  // namespace brisk
