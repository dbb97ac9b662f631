// Pre-tokenizers of byte-level BPE vocabularies: the text is cut into pieces by a list
// of regexes before merging, exactly as llama.cpp does for each `tokenizer.ggml.pre`.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace brisk {

class PreTokenizer {
 public:
  // `preset` is a tokenizer.ggml.pre value ("gpt-2", "llama-bpe", "qwen2", ...); ""
  // and "default" give llama.cpp's default list. Throws brisk::Error for unknown ones.
  explicit PreTokenizer(std::string_view preset);
  // The regexes a preset uses, applied in order (empty if the preset is unknown).
  static std::vector<std::string> regexes_for(std::string_view preset);

  // Cuts `text` into consecutive pieces covering all of it. Each regex cuts every
  // piece left by the previous one into its matches and the text between them
  // (llama.cpp's unicode_regex_split). Invalid UTF-8 bytes take part as if each were
  // U+FFFD, but the pieces still hold the original bytes, so nothing is lost.
  std::vector<std::string_view> split(std::string_view text) const;

  struct Regex;

 private:
  std::vector<std::shared_ptr<const Regex>> regexes_;
};

}  // namespace brisk
