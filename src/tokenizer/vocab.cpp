#include "tokenizer/vocab.h"

#include <algorithm>

#include "util/error.h"

namespace brisk {

namespace {

// Texts llama.cpp treats as end-of-generation when the vocabulary has them.
const char* const kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
};
// The first of these found becomes EOT when tokenizer.ggml.eot_token_id is absent.
const char* const kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
};

int32_t read_id(const GgufMetadata& meta, const char* key, int32_t def, int32_t n) {
  const int64_t v = meta.get_int(key, def);
  if (v < 0 || v >= n) return def >= 0 && def < n ? def : -1;  // as llama.cpp: keep the default
  return static_cast<int32_t>(v);
}

}  // namespace

Vocab Vocab::from_gguf(const GgufMetadata& meta) {
  Vocab v;
  const std::string model = meta.get_string("tokenizer.ggml.model");
  if (model == "gpt2") v.model = Model::kBpe;
  else if (model == "llama") v.model = Model::kSpm;
  else fail("tokenizer.ggml.model = '{}' is not supported (expected 'gpt2' or 'llama')", model);
  v.pre = meta.get_string("tokenizer.ggml.pre", "");

  v.text = meta.get_string_array("tokenizer.ggml.tokens");
  const auto n = static_cast<int32_t>(v.text.size());
  if (n == 0) fail("tokenizer.ggml.tokens is empty");
  v.score.assign(n, 0.0f);
  if (meta.has("tokenizer.ggml.scores")) {
    v.score = meta.get_float_array("tokenizer.ggml.scores");
    if (static_cast<int32_t>(v.score.size()) != n)
      fail("tokenizer.ggml.scores has {} entries, expected {} (one per token)", v.score.size(), n);
  }
  v.type.assign(n, TokenType::kNormal);
  if (meta.has("tokenizer.ggml.token_type")) {
    const auto t = meta.get_int_array("tokenizer.ggml.token_type");
    if (static_cast<int32_t>(t.size()) != n)
      fail("tokenizer.ggml.token_type has {} entries, expected {} (one per token)", t.size(), n);
    for (int32_t i = 0; i < n; ++i)
      v.type[i] = t[i] >= 1 && t[i] <= 6 ? static_cast<TokenType>(t[i]) : TokenType::kUndefined;
  }
  v.id_of.reserve(n);
  for (int32_t i = 0; i < n; ++i) {
    if (v.text[i].empty()) v.text[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
    v.id_of[v.text[i]] = i;
  }

  // Defaults per model, as llama.cpp's loader sets them before reading the keys.
  if (v.model == Model::kSpm) {
    v.bos = 1; v.eos = 2; v.unk = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
  } else {
    v.merges = meta.get_string_array("tokenizer.ggml.merges");
    v.bos = 11; v.eos = 11;
    const auto& p = v.pre;
    if (p == "llama3" || p == "llama-v3" || p == "llama-bpe" || p == "falcon3") {
      v.ignore_merges = true;
      v.add_bos = true;
    }
  }
  if (v.bos >= n) v.bos = -1;
  if (v.eos >= n) v.eos = -1;
  if (v.unk >= n) v.unk = -1;
  v.bos = read_id(meta, "tokenizer.ggml.bos_token_id", v.bos, n);
  v.eos = read_id(meta, "tokenizer.ggml.eos_token_id", v.eos, n);
  v.eot = read_id(meta, "tokenizer.ggml.eot_token_id", -1, n);
  v.eom = read_id(meta, "tokenizer.ggml.eom_token_id", -1, n);
  v.unk = read_id(meta, "tokenizer.ggml.unknown_token_id", v.unk, n);
  v.add_bos = meta.get_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  v.add_eos = meta.get_bool("tokenizer.ggml.add_eos_token", v.add_eos);
  v.add_space_prefix = meta.get_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  v.chat_template = meta.get_string("tokenizer.chat_template", "");

  if (v.eot < 0)
    for (const char* t : kEotTexts)
      if (int32_t id = v.find(t); id >= 0) { v.eot = id; break; }
  // End-of-generation set; such tokens are control tokens whatever the file says
  // (llama.cpp overrides the type too, so they are never rendered as text).
  for (const char* t : kEogTexts)
    if (int32_t id = v.find(t); id >= 0) v.eog.push_back(id);
  for (int32_t id : {v.eos, v.eot, v.eom})
    if (id >= 0) v.eog.push_back(id);
  std::sort(v.eog.begin(), v.eog.end());
  v.eog.erase(std::unique(v.eog.begin(), v.eog.end()), v.eog.end());
  for (int32_t id : v.eog) v.type[id] = TokenType::kControl;

  for (int32_t i = 0; i < n; ++i) {
    const auto t = v.type[i];
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown)
      v.specials.push_back(i);
  }
  std::stable_sort(v.specials.begin(), v.specials.end(), [&](int32_t a, int32_t b) {
    return v.text[a].size() > v.text[b].size();
  });
  return v;
}

std::vector<VocabTokenizer::Fragment> VocabTokenizer::split_special(std::string_view text,
                                                                    bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({-1, text});
  std::vector<Fragment> next;
  for (int32_t sid : vocab_.specials) {
    const auto t = vocab_.type[sid];
    if (!parse_special && (t == TokenType::kControl || t == TokenType::kUnknown)) continue;
    const std::string& st = vocab_.text[sid];
    next.clear();
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.id >= 0) { next.push_back(f); continue; }
      std::string_view rest = f.text;
      for (size_t pos; (pos = rest.find(st)) != std::string_view::npos;) {
        if (pos > 0) next.push_back({-1, rest.substr(0, pos)});
        next.push_back({sid, {}});
        rest.remove_prefix(pos + st.size());
        changed = true;
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_special,
                                            bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && vocab_.add_bos && vocab_.bos >= 0) out.push_back(vocab_.bos);
  bool after_special = true;
  for (const Fragment& f : split_special(text, parse_special)) {
    if (f.id >= 0) {
      out.push_back(f.id);
      after_special = true;
    } else {
      encode_text(f.text, after_special, out);
      after_special = false;
    }
  }
  if (add_special && vocab_.add_eos && vocab_.eos >= 0) out.push_back(vocab_.eos);
  return out;
}

std::string VocabTokenizer::token_to_piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= vocab_.size())
    fail("token id {} is out of range (vocabulary has {} tokens)", id, vocab_.size());
  switch (vocab_.type[id]) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      return render_special ? vocab_.text[id] : std::string();
    case TokenType::kUserDefined:
      return vocab_.text[id];  // stored as plain text, also in byte-level vocabularies
    case TokenType::kNormal:
      return normal_piece(id);
    case TokenType::kByte: {
      const std::string& t = vocab_.text[id];  // "<0xAB>"
      const auto hex = [](char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
             : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      };
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' && hex(t[3]) >= 0 &&
          hex(t[4]) >= 0)
        return std::string(1, static_cast<char>(hex(t[3]) * 16 + hex(t[4])));
      return normal_piece(id);
    }
    default:
      return {};  // unused and undefined tokens have no text (llama.cpp)
  }
}

bool VocabTokenizer::is_eog(int32_t id) const {
  return std::binary_search(vocab_.eog.begin(), vocab_.eog.end(), id);
}

}  // namespace brisk
