#include "util/utf8.h"

#include "util/error.h"

namespace brisk {

size_t utf8_valid_prefix(std::string_view s) {
  size_t i = 0, n = s.size();
  auto cont = [&](size_t j) { return j < n && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80; };
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return i;
    for (size_t k = 1; k < len; ++k) {
      if (!cont(i + k)) return i;
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return i;
    i += len;
  }
  return n;
}

void require_utf8(std::string_view s, std::string_view what) {
  size_t ok = utf8_valid_prefix(s);
  if (ok != s.size())
    fail("{} is not valid UTF-8 (byte offset {}: 0x{:02X})", what, ok,
         static_cast<unsigned char>(s[ok]));
}

}  // namespace brisk
