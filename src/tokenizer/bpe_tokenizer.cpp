// Byte-level BPE (GGUF model "gpt2"): pre-tokenize, map every byte to its GPT-2
// character, then apply the ranked merges inside each piece.
#include <mutex>
#include <queue>
#include <unordered_map>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"
#include "util/error.h"

namespace brisk {

namespace {

struct Merge { int32_t rank, result; };

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

class BpeTokenizer final : public VocabTokenizer {
 public:
  explicit BpeTokenizer(Vocab v) : VocabTokenizer(std::move(v)), pre_(vocab_.pre) {
    merges_.reserve(vocab_.merges.size());
    for (size_t r = 0; r < vocab_.merges.size(); ++r) {
      const std::string& m = vocab_.merges[r];
      const size_t sp = m.find(' ', 1);  // a part may itself be a single space character
      if (sp == std::string::npos) fail("tokenizer.ggml.merges[{}] = '{}' has no space", r, m);
      const int32_t a = vocab_.find(std::string_view(m).substr(0, sp));
      const int32_t b = vocab_.find(std::string_view(m).substr(sp + 1));
      // A merge of texts that are not tokens can never apply to token symbols.
      if (a < 0 || b < 0) continue;
      const int32_t ab = vocab_.find(m.substr(0, sp) + m.substr(sp + 1));
      merges_.try_emplace(pair_key(a, b), Merge{static_cast<int32_t>(r), ab});  // first wins
    }
    pieces_.resize(vocab_.text.size());
    for (size_t id = 0; id < vocab_.text.size(); ++id) pieces_[id] = decode_chars(vocab_.text[id]);
  }

 protected:
  void encode_text(std::string_view text, bool, std::vector<int32_t>& out) const override {
    for (std::string_view word : pre_.split(text)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = cache_.find(std::string(word)); it != cache_.end()) {
          out.insert(out.end(), it->second.begin(), it->second.end());
          continue;
        }
      }
      std::vector<int32_t> ids;
      encode_word(word, ids);
      out.insert(out.end(), ids.begin(), ids.end());
      std::lock_guard<std::mutex> lock(mu_);
      if (cache_.size() > 200000) cache_.clear();  // bound memory on endless input
      cache_.emplace(word, std::move(ids));
    }
  }

  std::string normal_piece(int32_t id) const override { return pieces_[id]; }

 private:
  // Token text -> bytes: each byte-level character back to its byte; any other
  // character (not produced by the byte map) is kept as its own UTF-8.
  static std::string decode_chars(std::string_view t) {
    std::string out;
    for (size_t i = 0; i < t.size();) {
      const size_t n = unicode::valid_utf8_len(t, i);
      if (n == 0) { out += t[i++]; continue; }
      const int b = unicode::utf8_cp_to_byte(unicode::decode_utf8(t, i, n));
      if (b >= 0) out += static_cast<char>(b);
      else out.append(t.substr(i, n));
      i += n;
    }
    return out;
  }

  void encode_word(std::string_view word, std::vector<int32_t>& out) const {
    std::string enc;
    enc.reserve(word.size() * 2);
    for (unsigned char c : word) enc += unicode::byte_to_utf8(c);
    if (vocab_.ignore_merges) {
      if (int32_t id = vocab_.find(enc); id >= 0) { out.push_back(id); return; }
    }
    struct Sym { int32_t id; uint32_t off, len; int32_t prev, next; bool alive; };
    std::vector<Sym> sym;
    for (size_t i = 0; i < enc.size();) {
      const size_t n = unicode::valid_utf8_len(enc, i);  // always valid: built by byte map
      const int32_t k = static_cast<int32_t>(sym.size());
      sym.push_back({vocab_.find(std::string_view(enc).substr(i, n)), static_cast<uint32_t>(i),
                     static_cast<uint32_t>(n), k - 1, k + 1, true});
      i += n;
    }
    if (sym.empty()) return;
    sym.back().next = -1;

    // Lowest rank first, then leftmost: the order llama.cpp and HF apply merges in.
    struct Cand { int32_t rank, left, right, left_id, right_id; };
    const auto worse = [](const Cand& x, const Cand& y) {
      return x.rank != y.rank ? x.rank > y.rank : x.left > y.left;
    };
    std::priority_queue<Cand, std::vector<Cand>, decltype(worse)> q(worse);
    const auto consider = [&](int32_t l, int32_t r) {
      if (l < 0 || r < 0 || sym[l].id < 0 || sym[r].id < 0) return;
      auto it = merges_.find(pair_key(sym[l].id, sym[r].id));
      if (it != merges_.end()) q.push({it->second.rank, l, r, sym[l].id, sym[r].id});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i, i + 1);
    while (!q.empty()) {
      const Cand c = q.top();
      q.pop();
      Sym& l = sym[c.left];
      Sym& r = sym[c.right];
      // Stale if either side has since merged with something else.
      if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id)
        continue;
      l.id = merges_.at(pair_key(c.left_id, c.right_id)).result;
      l.len += r.len;
      r.alive = false;
      l.next = r.next;
      if (r.next >= 0) sym[r.next].prev = c.left;
      consider(l.prev, c.left);
      consider(c.left, l.next);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
      if (sym[i].id >= 0) { out.push_back(sym[i].id); continue; }
      // Not a token (a vocabulary without every byte): emit what single bytes are
      // tokens, as llama.cpp does, rather than fail.
      for (size_t k = sym[i].off; k < sym[i].off + sym[i].len; ++k)
        if (int32_t id = vocab_.find(std::string_view(enc).substr(k, 1)); id >= 0) out.push_back(id);
    }
  }

  PreTokenizer pre_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<std::string> pieces_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocab v) {
  return std::make_unique<BpeTokenizer>(std::move(v));
}

}  // namespace brisk
