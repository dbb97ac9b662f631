// SentencePiece-style BPE (GGUF model "llama"): spaces become U+2581, then adjacent
// symbols are merged while their concatenation is a token, highest score first;
// characters that never became a token fall back to <0xXX> byte tokens.
#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace brisk {

namespace {

const char* const kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

class SpmTokenizer final : public VocabTokenizer {
 public:
  explicit SpmTokenizer(Vocab v) : VocabTokenizer(std::move(v)) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      snprintf(name, sizeof name, "<0x%02X>", b);
      int32_t id = vocab_.find(name);
      if (id < 0) id = vocab_.find(std::string(1, static_cast<char>(b)));
      byte_token_[b] = id >= 0 ? id : vocab_.unk;  // -1 if the vocabulary has neither
    }
  }

 protected:
  void encode_text(std::string_view text, bool after_special,
                   std::vector<int32_t>& out) const override {
    std::string s;
    s.reserve(text.size() + 8);
    // The prefix space stands for "start of a word" at the start of the text and after
    // a special token, as llama.cpp and SentencePiece's add_dummy_prefix do.
    if (vocab_.add_space_prefix && after_special) s += kSpace;
    for (char c : text) {
      if (c == ' ') s += kSpace;
      else s += c;
    }

    struct Sym { uint32_t off, len; int32_t prev, next; };
    std::vector<Sym> sym;
    for (size_t i = 0; i < s.size();) {
      size_t n = unicode::valid_utf8_len(s, i);
      if (n == 0) n = 1;  // an invalid byte is a symbol of its own (ends as a byte token)
      const auto k = static_cast<int32_t>(sym.size());
      sym.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(n), k - 1, k + 1});
      i += n;
    }
    if (sym.empty()) return;
    sym.back().next = -1;

    struct Cand { float score; int32_t left, right; uint32_t len; };
    const auto worse = [](const Cand& x, const Cand& y) {
      return x.score != y.score ? x.score < y.score : x.left > y.left;
    };
    std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> q(worse);
    const std::string_view sv(s);
    const auto consider = [&](int32_t l, int32_t r) {
      if (l < 0 || r < 0) return;
      const uint32_t len = sym[l].len + sym[r].len;
      const int32_t id = vocab_.find(sv.substr(sym[l].off, len));
      if (id >= 0) q.push({vocab_.score[id], l, r, len});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i, i + 1);
    while (!q.empty()) {
      const Cand c = q.top();
      q.pop();
      Sym& l = sym[c.left];
      Sym& r = sym[c.right];
      // Stale if either side merged since: lengths only grow, so the sum tells.
      if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;
      l.len += r.len;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = c.left;
      consider(l.prev, c.left);
      consider(c.left, l.next);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
      const std::string_view piece = sv.substr(sym[i].off, sym[i].len);
      if (int32_t id = vocab_.find(piece); id >= 0) {
        out.push_back(id);
        continue;
      }
      for (unsigned char b : piece)
        if (byte_token_[b] >= 0) out.push_back(byte_token_[b]);
    }
  }

  std::string normal_piece(int32_t id) const override {
    const std::string& t = vocab_.text[id];
    std::string out;
    out.reserve(t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      if (t.compare(i, 3, kSpace) == 0) {
        out += ' ';
        i += 2;
      } else {
        out += t[i];
      }
    }
    return out;
  }

 private:
  int32_t byte_token_[256];
};

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocab v) {
  return std::make_unique<SpmTokenizer>(std::move(v));
}

}  // namespace brisk
