#include "engine/loaded_model.h"

#include "util/error.h"

namespace brisk {

LoadedModel load_for_generation(const std::string& path, Device device) {
  ModelSource src = load_model_source(path);
  LoadedModel m;
  m.tokenizer = Tokenizer::from_source(src);
  m.model = make_model_on(std::move(src), device);
  if (m.tokenizer->n_vocab() > m.model->config().n_vocab)
    fail("{}: tokenizer has {} tokens but the model's output has only {}", path,
         m.tokenizer->n_vocab(), m.model->config().n_vocab);
  return m;
}

}  // namespace brisk
