// libFuzzer target: any bytes, encoded with brisk's byte-level BPE (brisk-nano's
// tokenizer.json) and with an SPM vocabulary (ggml-vocab-llama-spm.gguf), parse_special
// off and on, must tokenize without a crash, decode, and stream through StreamDecoder.
// Byte-level BPE is lossless, so its round trip must give the input back exactly.
// Fixtures are found under $BRISK_SOURCE_DIR, else the source tree of this file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/gguf.h"
#include "fuzz_fixtures.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "util/error.h"

namespace {

struct Tokenizers {
  std::unique_ptr<brisk::Tokenizer> bpe, spm;
  Tokenizers() {
    bpe = fuzz::nano_tokenizer();
    spm = brisk::Tokenizer::from_gguf(brisk::GgufFile::open(fuzz::fixture("vocab/ggml-vocab-llama-spm.gguf"))->metadata());
  }
};

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = brisk::unicode::valid_utf8_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string stream(const brisk::Tokenizer& tok, const std::vector<int32_t>& ids) {
  brisk::StreamDecoder d(tok);
  std::string out;
  for (int32_t id : ids) out += d.push(id);
  out += d.flush();
  if (!valid_utf8(out)) __builtin_trap();  // StreamDecoder must emit valid UTF-8 only
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizers t;
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (bool parse_special : {false, true}) {
    const auto b = t.bpe->encode(text, parse_special, parse_special);
    if (t.bpe->decode(b, /*render_special=*/true) != text) __builtin_trap();
    const std::string s = stream(*t.bpe, b);
    if (valid_utf8(text) && !parse_special && s != text) __builtin_trap();

    const auto p = t.spm->encode(text, parse_special, parse_special);
    (void)t.spm->decode(p, parse_special);
    stream(*t.spm, p);
  }
  return 0;
}
