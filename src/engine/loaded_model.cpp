#include "engine/loaded_model.h"

#include "util/error.h"

namespace brisk {

LoadedModel load_for_generation(const std::string& path) {
  ModelSource src = load_model_source(path);
  LoadedModel m;
  if (src.meta.has("tokenizer.ggml.model"))
    m.tokenizer = Tokenizer::from_gguf(src.meta);
  else if (!src.tokenizer_json.empty())
    m.tokenizer = Tokenizer::from_hf_json(src.tokenizer_json, src.tokenizer_config_json);
  else
    fail("{}: no tokenizer: neither tokenizer.ggml.* metadata nor tokenizer.json", path);
  m.model = make_model(std::move(src));
  if (m.tokenizer->n_vocab() > m.model->config().n_vocab)
    fail("{}: tokenizer has {} tokens but the model's output has only {}", path,
         m.tokenizer->n_vocab(), m.model->config().n_vocab);
  return m;
}

}  // namespace brisk
