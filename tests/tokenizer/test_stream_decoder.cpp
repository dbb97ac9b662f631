#include <gtest/gtest.h>

#include "test_util.h"

namespace brisk {
namespace {

// In llama-spm, byte b is the token "<0xBB>" with id b + 3.
int32_t byte_id(uint8_t b) { return b + 3; }

TEST(StreamDecoder, HoldsBytesOfAnUnfinishedCharacter) {
  auto tok = test::llama_spm();
  StreamDecoder d(*tok);
  // U+1F680 (rocket) = F0 9F 9A 80, one byte token each.
  EXPECT_EQ(d.push(byte_id(0xF0)), "");
  EXPECT_EQ(d.push(byte_id(0x9F)), "");
  EXPECT_EQ(d.push(byte_id(0x9A)), "");
  EXPECT_EQ(d.push(byte_id(0x80)), "🚀");
  // é = C3 A9
  EXPECT_EQ(d.push(byte_id(0xC3)), "");
  EXPECT_EQ(d.push(byte_id(0xA9)), "é");
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
  auto tok = test::llama_spm();
  StreamDecoder d(*tok);
  EXPECT_EQ(d.push(byte_id(0xFF)), "\xEF\xBF\xBD");  // can never start a character
  EXPECT_EQ(d.push(byte_id(0xE2)), "");
  EXPECT_EQ(d.push(byte_id(0x41)), "\xEF\xBF\xBD" "A");  // E2 cut short by 'A'
  EXPECT_EQ(d.push(byte_id(0xF0)), "");
  EXPECT_EQ(d.push(byte_id(0x9F)), "");
  EXPECT_EQ(d.flush(), "\xEF\xBF\xBD\xEF\xBF\xBD");  // left over at the end
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamDecoder, ByteLevelTokensSplitInsideCharacters) {
  // brisk's BPE has no token for most emoji: they come out as several byte-level
  // tokens, some holding a partial character. Streaming must give the same text,
  // in valid UTF-8 chunks.
  auto tok = test::load_nano_json();
  const std::string text = "Café 🚀 naïve 日本語 ✅ done";
  const auto ids = tok->encode(text, false, false);
  StreamDecoder d(*tok);
  std::string all;
  int held = 0;
  for (int32_t id : ids) {
    const std::string piece = tok->token_to_piece(id);
    const std::string out = d.push(id);
    if (out.size() != piece.size()) ++held;
    // Every chunk is whole characters.
    for (size_t i = 0; i < out.size();) {
      const auto c = static_cast<uint8_t>(out[i]);
      const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      ASSERT_LE(i + n, out.size()) << "partial character in a chunk";
      i += n;
    }
    all += out;
  }
  all += d.flush();
  EXPECT_EQ(all, text);
  EXPECT_GT(held, 0) << "expected at least one token to end inside a character";
}

}  // namespace
}  // namespace brisk
