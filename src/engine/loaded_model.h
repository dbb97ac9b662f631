// A model ready to generate: weights plus the tokenizer that came with them.
#pragma once
#include <memory>
#include <string>

#include "model/cuda/cuda_model.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace brisk {

struct LoadedModel {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Model> model;
};

// `path`: a .gguf file or a Hugging Face folder. The tokenizer comes from the GGUF's
// tokenizer.ggml.* keys or from tokenizer.json. `device` picks the CPU or the CUDA model.
LoadedModel load_for_generation(const std::string& path, Device device = Device::Cpu);

}  // namespace brisk
