#include "util/utf8.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace brisk {
namespace {

TEST(Utf8, AcceptsValidText) {
  for (std::string s : {"", "hello", "caf\xC3\xA9", "\xE2\x80\x94", "\xF0\x9F\xA6\x99 llama",
                        "\xF4\x8F\xBF\xBF"})
    EXPECT_EQ(utf8_valid_prefix(s), s.size()) << s;
}

TEST(Utf8, FindsFirstBadByte) {
  EXPECT_EQ(utf8_valid_prefix("ab\xFFz"), 2u);
  EXPECT_EQ(utf8_valid_prefix("ab\xC3"), 2u);            // truncated sequence
  EXPECT_EQ(utf8_valid_prefix("\xC0\x80"), 0u);          // overlong NUL
  EXPECT_EQ(utf8_valid_prefix("x\xE0\x80\xAF"), 1u);     // overlong '/'
  EXPECT_EQ(utf8_valid_prefix("\xED\xA0\x80"), 0u);      // surrogate U+D800
  EXPECT_EQ(utf8_valid_prefix("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8_valid_prefix("\x80"), 0u);              // stray continuation
}

TEST(Utf8, RequireNamesOffsetAndByte) {
  try {
    require_utf8("abc\xFE", "prompt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "prompt is not valid UTF-8 (byte offset 3: 0xFE)");
  }
}

}  // namespace
}  // namespace brisk
