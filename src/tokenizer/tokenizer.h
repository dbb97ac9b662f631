// Text <-> token ids, exactly as the model was trained: byte-level BPE (GPT-2 style, with
// pre-tokenizer presets) and SentencePiece-style BPE (GGUF tokenizer model "llama").
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/gguf.h"
#include "format/model_source.h"

namespace brisk {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // From GGUF metadata (tokenizer.ggml.*). Throws brisk::Error on missing/invalid keys.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufMetadata& meta);
  // From a Hugging Face tokenizer.json (+ optional tokenizer_config.json contents).
  static std::unique_ptr<Tokenizer> from_hf_json(const std::string& tokenizer_json,
                                                 const std::string& tokenizer_config_json);
  // The tokenizer that came with a model: tokenizer.ggml.* keys, else tokenizer.json.
  static std::unique_ptr<Tokenizer> from_source(const ModelSource& src);

  // add_special: prepend BOS (and append EOS) when the vocabulary asks for it.
  // parse_special: match control/special token texts in `text` (like llama.cpp's
  // parse_special); otherwise they are tokenized as plain text.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special,
                                      bool parse_special) const = 0;
  // Raw bytes of one token (may be a partial UTF-8 sequence); control tokens give ""
  // unless render_special.
  virtual std::string token_to_piece(int32_t id, bool render_special = false) const = 0;
  std::string decode(const std::vector<int32_t>& ids, bool render_special = false) const;

  virtual int32_t n_vocab() const = 0;
  virtual int32_t bos() const = 0;       // -1 if none
  virtual int32_t eos() const = 0;       // -1 if none
  virtual bool add_bos() const = 0;
  virtual bool is_eog(int32_t id) const = 0;  // end of generation (EOS, EOT, ...)
  virtual std::string chat_template() const = 0;  // "" if the model has none
};

// Turns a stream of token ids into text that never ends inside a UTF-8 sequence:
// bytes of an unfinished character are held back until the character completes.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  std::string push(int32_t id);  // complete characters only
  std::string flush();           // whatever is left (invalid bytes as U+FFFD)
 private:
  const Tokenizer& tok_;
  std::string pending_;
};

// Adds the tokenizer.ggml.* keys that describe a tokenizer.json, as llama.cpp's
// converter would (used by `brisk convert`).
void add_gguf_tokenizer_metadata(const std::string& tokenizer_json,
                                 const std::string& tokenizer_config_json, GgufMetadata& meta);

}  // namespace brisk
