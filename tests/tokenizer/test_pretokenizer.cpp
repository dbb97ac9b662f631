// Pre-tokenizer presets, with splits derived by hand from each preset's regexes.
#include <gtest/gtest.h>

#include "tokenizer/pretokenizer.h"
#include "util/error.h"

namespace brisk {
namespace {

std::vector<std::string> split(const char* preset, std::string_view text) {
  PreTokenizer p(preset);
  std::vector<std::string> out;
  for (auto piece : p.split(text)) out.emplace_back(piece);
  return out;
}
using V = std::vector<std::string>;

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(split("gpt-2", "I'M fine, you're 12345"), (V{"I", "'", "M", " fine", ",", " you", "'re", " 12345"}));
  // \s+(?!\S) leaves the last space to the word that follows.
  EXPECT_EQ(split("gpt-2", "a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(split("gpt-2", "x \n"), (V{"x", " \n"}));
  EXPECT_EQ(split("gpt-2", ""), V{});
}

TEST(PreTokenizer, Llama3) {
  EXPECT_EQ(split("llama-bpe", "Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(split("llama3", "12345"), (V{"123", "45"}));  // at most three digits
  EXPECT_EQ(split("llama-bpe", "I'M fine"), (V{"I", "'M", " fine"}));  // any case
  EXPECT_EQ(split("llama-bpe", "a,b"), (V{"a", ",b"}));  // one non-letter joins the word
  EXPECT_EQ(split("llama-bpe", "  hi\n\nthere"), (V{" ", " hi", "\n\n", "there"}));
  EXPECT_EQ(split("llama-bpe", "x?!\n\ny"), (V{"x", "?!\n\n", "y"}));
}

TEST(PreTokenizer, Qwen2) {
  EXPECT_EQ(split("qwen2", "12345"), (V{"1", "2", "3", "4", "5"}));  // single digits
  EXPECT_EQ(split("qwen2", "I'VE 2 cats"), (V{"I", "'VE", " ", "2", " cats"}));
  EXPECT_EQ(split("qwen2", "a,b"), (V{"a", ",b"}));
}

TEST(PreTokenizer, Falcon) {
  // Punctuation runs first, then GPT-2 pieces, then groups of three digits.
  EXPECT_EQ(split("falcon", "hi!! 1234567"), (V{"hi", "!!", " ", "123", "456", "7"}));
  EXPECT_EQ(split("falcon", "a+b"), (V{"a", "+", "b"}));
  EXPECT_EQ(split("falcon", "1234567"), (V{"123", "456", "7"}));
}

TEST(PreTokenizer, DeepseekCoder) {
  EXPECT_EQ(split("deepseek-coder", "ab 12\ncd"), (V{"ab", " ", "1", "2", "\n", "cd"}));
}

TEST(PreTokenizer, NonAsciiWhitespaceIsWhitespace) {
  // U+0085 and U+3000 count as \s, as in llama.cpp.
  EXPECT_EQ(split("gpt-2", "a\xc2\x85\xc2\x85z"), (V{"a", "\xc2\x85", "\xc2\x85", "z"}));
  EXPECT_EQ(split("gpt-2", "a\xe3\x80\x80"), (V{"a", "\xe3\x80\x80"}));
}

TEST(PreTokenizer, UnknownPresetIsAnError) {
  EXPECT_THROW(PreTokenizer("no-such-pre"), Error);
}

}  // namespace
}  // namespace brisk
