#include "tokenizer/tokenizer.h"

#include "tokenizer/vocab.h"
#include "util/error.h"

namespace brisk {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufMetadata& meta) {
  Vocab v = Vocab::from_gguf(meta);
  if (v.model == Vocab::Model::kSpm) return make_spm_tokenizer(std::move(v));
  return make_bpe_tokenizer(std::move(v));
}

std::unique_ptr<Tokenizer> Tokenizer::from_hf_json(const std::string& tokenizer_json,
                                                   const std::string& tokenizer_config_json) {
  // One path for both sources: the JSON becomes the keys a converted GGUF would hold.
  GgufMetadata meta;
  add_gguf_tokenizer_metadata(tokenizer_json, tokenizer_config_json, meta);
  return from_gguf(meta);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  // SPM adds a space in front of the text when encoding; like llama.cpp's detokenize,
  // drop it from the first piece again (a leading BOS piece, even empty, prevents it).
  const auto* vt = dynamic_cast<const VocabTokenizer*>(this);
  bool strip = vt && vt->strips_leading_space();
  for (int32_t id : ids) {
    std::string p = token_to_piece(id, render_special);
    if (strip && !p.empty() && p[0] == ' ') p.erase(0, 1);
    strip = false;
    out += p;
  }
  return out;
}

std::unique_ptr<Tokenizer> Tokenizer::from_source(const ModelSource& src) {
  if (src.meta.has("tokenizer.ggml.model")) return from_gguf(src.meta);
  if (!src.tokenizer_json.empty()) return from_hf_json(src.tokenizer_json, src.tokenizer_config_json);
  fail("{}: no tokenizer: neither tokenizer.ggml.* metadata nor tokenizer.json", src.path);
}

}  // namespace brisk
