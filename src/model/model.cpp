#include "model/model.h"

namespace brisk {

std::unique_ptr<Model> make_llama_model(ModelSource src, ModelConfig cfg);  // llama.cpp

std::unique_ptr<Model> make_model(ModelSource src) {
  ModelConfig cfg = read_model_config(src);
  switch (cfg.arch) {
    case Arch::Llama:
    case Arch::Qwen2:
    case Arch::Qwen3:
      return make_llama_model(std::move(src), std::move(cfg));
  }
  return nullptr;  // unreachable: read_model_config rejects other architectures
}

std::unique_ptr<Model> load_model(const std::string& path) { return make_model(load_model_source(path)); }

}  // namespace brisk
