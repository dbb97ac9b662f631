#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "tokenizer/unicode.h"
#include "util/error.h"

namespace brisk {

namespace {

const char* const kGpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
// Llama 3 and Qwen2 match contractions case-insensitively and keep one non-letter in
// front of a word; they differ only in how many digits form a number piece.
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// llama.cpp's whitespace set (Unicode White_Space). PCRE2's \s differs on U+0085, so
// \s and \S are spelled out.
const char* const kWhite =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

std::string spell_out_whitespace(std::string_view re) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char n = re[++i];
      if (n == 's') {
        out += in_class ? std::string(kWhite) : "[" + std::string(kWhite) + "]";
      } else if (n == 'S' && !in_class) {
        out += "[^" + std::string(kWhite) + "]";
      } else {
        out += c;
        out += n;
      }
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  explicit Regex(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE off = 0;
    const std::string p = spell_out_whitespace(pattern);
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP,
                         &err, &off, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail("pre-tokenizer regex '{}' does not compile at offset {}: {}", pattern, off,
           reinterpret_cast<const char*>(msg));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional speed-up; falls back silently
  }
  ~Regex() { pcre2_code_free(code); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
};

std::vector<std::string> PreTokenizer::regexes_for(std::string_view p) {
  if (p == "gpt-2" || p == "gpt2" || p == "phi-2" || p == "mpt" || p == "olmo" || p == "jais")
    return {kGpt2};
  if (p == "llama3" || p == "llama-v3" || p == "llama-bpe" || p == "falcon3" || p == "dbrx" ||
      p == "smaug-bpe")
    return {kLlama3};
  if (p == "qwen2" || p == "deepseek-r1-qwen" || p == "stablelm2" || p == "megrez")
    return {kQwen2};
  if (p == "deepseek-coder")
    return {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"};
  if (p == "falcon")
    return {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
  if (p == "starcoder" || p == "refact" || p == "command-r" || p == "smollm" || p == "codeshell")
    return {"\\p{N}", kGpt2};
  if (p.empty() || p == "default")
    return {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
  return {};
}

PreTokenizer::PreTokenizer(std::string_view preset) {
  const auto list = regexes_for(preset);
  if (list.empty())
    fail("tokenizer.ggml.pre = '{}' is not a supported pre-tokenizer (supported: gpt-2, "
         "llama-bpe/llama3, qwen2, deepseek-coder, falcon, starcoder, default)",
         preset);
  // Compiled patterns are shared: the same preset is loaded by many tokenizers.
  for (const auto& re : list) regexes_.push_back(std::make_shared<const Regex>(re));
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  // PCRE2 in UTF mode needs valid UTF-8: stand U+FFFD in for each invalid byte and
  // remember where every byte of the stand-in text came from.
  std::string clean;
  std::vector<uint32_t> orig;  // orig[i] = offset in `text` of clean[i], when mapped
  bool mapped = false;
  for (size_t i = 0; i < text.size();) {
    const size_t n = unicode::valid_utf8_len(text, i);
    if (n == 0 && !mapped) {
      mapped = true;
      clean.assign(text.substr(0, i));
      for (size_t k = 0; k < i; ++k) orig.push_back(static_cast<uint32_t>(k));
    }
    if (mapped) {
      if (n == 0) {
        clean += "\xEF\xBF\xBD";
        orig.insert(orig.end(), 3, static_cast<uint32_t>(i));
      } else {
        clean.append(text.substr(i, n));
        for (size_t k = 0; k < n; ++k) orig.push_back(static_cast<uint32_t>(i + k));
      }
    }
    i += n == 0 ? 1 : n;
  }
  const std::string_view subject = mapped ? std::string_view(clean) : text;
  orig.push_back(static_cast<uint32_t>(text.size()));

  struct Span { size_t b, e; };
  std::vector<Span> spans;
  if (!subject.empty()) spans.push_back({0, subject.size()});
  pcre2_match_data* md = nullptr;
  for (const auto& re : regexes_) {
    if (!md) md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    std::vector<Span> next;
    next.reserve(spans.size() * 2);
    for (const Span s : spans) {
      // Each piece is matched on its own: its ends are the ends of the subject, as in
      // llama.cpp, so lookaheads cannot see past them.
      const auto* base = reinterpret_cast<PCRE2_SPTR>(subject.data() + s.b);
      const size_t len = s.e - s.b;
      size_t cur = 0, pos = 0;
      while (pos <= len) {
        const int rc = pcre2_match(re->code, base, len, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc < 0) break;  // no match (or a resource limit: keep the rest whole)
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t mb = ov[0], me = ov[1];
        if (me == mb) {  // empty match: step over one character
          pos = mb + 1;
          while (pos < len && (static_cast<uint8_t>(subject[s.b + pos]) & 0xC0) == 0x80) ++pos;
          continue;
        }
        if (mb > cur) next.push_back({s.b + cur, s.b + mb});
        next.push_back({s.b + mb, s.b + me});
        cur = pos = me;
      }
      if (cur < len) next.push_back({s.b + cur, s.e});
    }
    spans.swap(next);
  }
  if (md) pcre2_match_data_free(md);

  std::vector<std::string_view> out;
  out.reserve(spans.size());
  for (const Span s : spans) {
    const size_t b = mapped ? orig[s.b] : s.b;
    const size_t e = mapped ? orig[s.e] : s.e;
    out.push_back(text.substr(b, e - b));
  }
  return out;
}

}  // namespace brisk
