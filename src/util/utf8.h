// UTF-8 validation for text that enters brisk from users (prompts, files, requests).
#pragma once
#include <cstddef>
#include <string_view>

namespace brisk {

// Length of the longest valid UTF-8 prefix of s (s.size() when all of s is valid).
// Rejects overlong forms, surrogates and code points above U+10FFFF.
size_t utf8_valid_prefix(std::string_view s);

// Throws brisk::Error "<what> is not valid UTF-8 (byte offset N: 0xXX)" when s is not.
void require_utf8(std::string_view s, std::string_view what);

}  // namespace brisk
