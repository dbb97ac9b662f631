// UTF-8 helpers and the GPT-2 byte <-> printable-character map used by byte-level BPE.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace brisk::unicode {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if the bytes there are not
// one (stray continuation byte, overlong form, surrogate, > U+10FFFF, truncated).
size_t valid_utf8_len(std::string_view s, size_t i);
// Whether s[i..] is a proper prefix of a valid sequence (more bytes could complete it).
bool is_utf8_prefix(std::string_view s, size_t i);
// Decodes the sequence at s[i] (valid_utf8_len(s, i) must be > 0).
uint32_t decode_utf8(std::string_view s, size_t i, size_t len);
void append_utf8(std::string& out, uint32_t cp);

// GPT-2's reversible map: every byte 0..255 gets a printable code point (printable
// Latin-1 bytes map to themselves, the rest to U+0100.. in order), so merges and
// vocabularies can be stored as text.
const std::string& byte_to_utf8(uint8_t b);
// The byte a byte-level character stands for, or -1 if `cp` is not one of them.
int utf8_cp_to_byte(uint32_t cp);

}  // namespace brisk::unicode
