// The vocabulary shared by both tokenizer algorithms: token texts, types and scores as
// stored under tokenizer.ggml.*, the special ids, and the llama.cpp defaults for them.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace brisk {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0, kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5,
  kByte = 6,
};

// Lets the text -> id map be searched with a string_view, without a copy.
struct TextHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Vocab {
  enum class Model { kBpe, kSpm };  // tokenizer.ggml.model "gpt2" / "llama"
  Model model = Model::kBpe;
  std::string pre;  // tokenizer.ggml.pre
  std::vector<std::string> text;
  std::vector<TokenType> type;
  std::vector<float> score;
  // A duplicated text maps to its last id.
  std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>> id_of;
  std::vector<std::string> merges;                  // "left right", rank = index

  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1;
  bool add_bos = false, add_eos = false;
  bool add_space_prefix = false;  // SPM: a leading space before text (not after BOS)
  bool ignore_merges = false;     // Llama 3: a word that is a token is taken whole
  std::vector<int32_t> eog;       // ids that end generation
  std::vector<int32_t> specials;  // control, user-defined, unknown: longest text first
  std::string chat_template;

  static Vocab from_gguf(const GgufMetadata& meta);
  int32_t find(std::string_view s) const {
    auto it = id_of.find(s);
    return it == id_of.end() ? -1 : it->second;
  }
  int32_t size() const { return static_cast<int32_t>(text.size()); }
};

// Common part of the two algorithms: special-token splitting, BOS/EOS, pieces.
class VocabTokenizer : public Tokenizer {
 public:
  explicit VocabTokenizer(Vocab v) : vocab_(std::move(v)) {}

  std::vector<int32_t> encode(std::string_view text, bool add_special,
                              bool parse_special) const override;
  std::string token_to_piece(int32_t id, bool render_special = false) const override;
  int32_t n_vocab() const override { return vocab_.size(); }
  int32_t bos() const override { return vocab_.bos; }
  int32_t eos() const override { return vocab_.eos; }
  bool add_bos() const override { return vocab_.add_bos; }
  bool is_eog(int32_t id) const override;
  std::string chat_template() const override { return vocab_.chat_template; }

  const Vocab& vocab() const { return vocab_; }
  // Whether decode() drops one leading space of the first piece (SPM's added prefix).
  bool strips_leading_space() const { return vocab_.add_space_prefix; }

  // Cuts text at special-token texts (longest first; control and unknown ones only when
  // parse_special, user-defined ones always, as llama.cpp does). Each fragment is
  // either a token id (>= 0, empty view) or text (id -1).
  struct Fragment { int32_t id; std::string_view text; };
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;

 protected:
  // Appends the ids of a plain-text fragment; `after_special` says the fragment starts
  // the text or follows a special token.
  virtual void encode_text(std::string_view text, bool after_special,
                           std::vector<int32_t>& out) const = 0;
  // Bytes of a normal token.
  virtual std::string normal_piece(int32_t id) const = 0;

  Vocab vocab_;
};

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab v);
std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab v);

}  // namespace brisk
