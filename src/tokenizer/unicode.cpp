#include "tokenizer/unicode.h"

#include <array>

namespace brisk::unicode {

size_t valid_utf8_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t min;
  if ((c & 0xE0) == 0xC0) { n = 2; min = 0x80; }
  else if ((c & 0xF0) == 0xE0) { n = 3; min = 0x800; }
  else if ((c & 0xF8) == 0xF0) { n = 4; min = 0x10000; }
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  const uint32_t cp = decode_utf8(s, i, n);
  // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool is_utf8_prefix(std::string_view s, size_t i) {
  const auto c = static_cast<uint8_t>(s[i]);
  const size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  const size_t rem = s.size() - i;
  if (n == 0 || rem >= n) return false;
  for (size_t k = 1; k < rem; ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    uint8_t lo = 0x80, hi = 0xBF;
    if (k == 1) {  // the second byte rules out overlong forms, surrogates, > U+10FFFF
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    if (b < lo || b > hi) return false;
  }
  return true;
}

uint32_t decode_utf8(std::string_view s, size_t i, size_t len) {
  const auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k])); };
  switch (len) {
    case 1: return b(0);
    case 2: return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
    case 3: return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
    default: return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

namespace {

struct ByteMap {
  std::array<uint32_t, 256> cp{};
  std::array<std::string, 256> utf8;
  ByteMap() {
    // Bytes that are printable Latin-1 keep their own code point; the others are
    // numbered from U+0100 in byte order (GPT-2's bytes_to_unicode).
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      append_utf8(utf8[b], cp[b]);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

const std::string& byte_to_utf8(uint8_t b) { return byte_map().utf8[b]; }

int utf8_cp_to_byte(uint32_t cp) {
  if (cp < 256) {
    const bool printable = (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE);
    return printable ? static_cast<int>(cp) : -1;
  }
  // U+0100.. are the non-printable bytes, in order.
  static const std::array<int, 68> table = [] {
    std::array<int, 68> t{};
    const auto& m = byte_map();
    for (int b = 0; b < 256; ++b)
      if (m.cp[b] >= 256) t[m.cp[b] - 256] = b;
    return t;
  }();
  if (cp - 256 < table.size()) return table[cp - 256];
  return -1;
}

}  // namespace brisk::unicode
