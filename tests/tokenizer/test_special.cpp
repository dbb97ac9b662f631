// Special tokens, BOS/EOS flags, pieces, invalid UTF-8.
#include <gtest/gtest.h>

#include "test_util.h"

namespace brisk {
namespace {

TEST(Special, ParseSpecialSplitsOnControlTokenText) {
  auto tok = test::load_nano_json();
  const auto hello = tok->encode("Hello", false, false);
  auto with = tok->encode("<|endoftext|>Hello", false, true);
  ASSERT_EQ(with.size(), hello.size() + 1);
  EXPECT_EQ(with[0], 0);
  EXPECT_EQ(std::vector<int32_t>(with.begin() + 1, with.end()), hello);
  // Off: the same characters are ordinary text, and come back as such.
  auto plain = tok->encode("<|endoftext|>Hello", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 0), 0);
  EXPECT_GT(plain.size(), with.size());
  EXPECT_EQ(tok->decode(plain), "<|endoftext|>Hello");
  // Rendering: control tokens are hidden unless asked for.
  EXPECT_EQ(tok->token_to_piece(0), "");
  EXPECT_EQ(tok->token_to_piece(0, true), "<|endoftext|>");
  EXPECT_EQ(tok->decode(with), "Hello");
  EXPECT_EQ(tok->decode(with, true), "<|endoftext|>Hello");
}

TEST(Special, SpmSpecialTokenAndPrefixSpace) {
  auto tok = test::llama_spm();
  // "Hello" gets the SentencePiece prefix space: "▁Hello" = 15043.
  EXPECT_EQ(tok->encode("Hello", false, false), (std::vector<int32_t>{15043}));
  // After a special token the text starts a new word again.
  EXPECT_EQ(tok->encode("<s>Hello", false, true), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(tok->encode("</s>", false, true), (std::vector<int32_t>{2}));
  EXPECT_NE(tok->encode("<s>Hello", false, false)[0], 1);
}

TEST(Special, BosEosFlags) {
  auto s = test::llama_spm();  // add_bos_token = true, add_eos_token = false
  EXPECT_TRUE(s->add_bos());
  EXPECT_EQ(s->bos(), 1);
  EXPECT_EQ(s->eos(), 2);
  EXPECT_EQ(s->encode("Hello", true, false), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(s->encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_EQ(s->encode("", false, false), (std::vector<int32_t>{}));
  EXPECT_TRUE(s->is_eog(2));
  EXPECT_FALSE(s->is_eog(1));
  // llama.cpp keeps the space when the text follows a BOS.
  EXPECT_EQ(s->decode({1, 15043}), " Hello");
  EXPECT_EQ(s->decode({15043}), "Hello");

  auto g = test::load_gguf_tokenizer(test::fixture("vocab/ggml-vocab-gpt-2.gguf"));
  EXPECT_FALSE(g->add_bos());  // gpt2 vocabularies add nothing unless the file says so
  EXPECT_EQ(g->encode("Hello", true, false), g->encode("Hello", false, false));
  EXPECT_TRUE(g->is_eog(50256));

  auto d = test::load_gguf_tokenizer(test::fixture("vocab/ggml-vocab-deepseek-coder.gguf"));
  EXPECT_TRUE(d->add_bos());  // tokenizer.ggml.add_bos_token = true
  auto ids = d->encode("Hello", true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 32013);
  EXPECT_TRUE(d->is_eog(32014));
}

TEST(Special, UserDefinedTokensAlwaysMatch) {
  // deepseek-coder has '<|User|>' (user-defined, not special): split even without
  // parse_special, while the control '<｜begin▁of▁sentence｜>' is not.
  auto d = test::load_gguf_tokenizer(test::fixture("vocab/ggml-vocab-deepseek-coder.gguf"));
  EXPECT_EQ(d->encode("<|User|>", false, false), (std::vector<int32_t>{32019}));
  EXPECT_EQ(d->encode("<｜begin▁of▁sentence｜>", false, true), (std::vector<int32_t>{32013}));
  EXPECT_GT(d->encode("<｜begin▁of▁sentence｜>", false, false).size(), 1u);
}

TEST(Special, InvalidUtf8DoesNotCrashAndRoundTrips) {
  // Invalid bytes take part in pre-tokenizing as U+FFFD but keep their own byte
  // (byte-level BPE) or become <0xXX> tokens (SPM): decoding gives the bytes back.
  const std::vector<std::string> inputs = {
      "\xff", "\xc3", "abc \xff\xfe def", "\xe2\x82", "x\xf0\x9f\x9a", "\xed\xa0\x80 surrogate",
      "\xc0\xaf overlong", std::string("nul\0byte", 8), "é\x80\x80 ok",
  };
  auto b = test::load_nano_json();
  auto s = test::llama_spm();
  for (const auto& in : inputs) {
    for (bool ps : {false, true}) {
      EXPECT_EQ(b->decode(b->encode(in, false, ps)), in);
      EXPECT_EQ(s->decode(s->encode(in, false, ps)), in);
    }
  }
}

TEST(Special, OutOfRangeIdIsAnError) {
  auto tok = test::load_nano_json();
  EXPECT_THROW(tok->token_to_piece(16384), Error);
  EXPECT_THROW(tok->token_to_piece(-1), Error);
}

TEST(Special, BadJsonIsAClearError) {
  EXPECT_THROW(Tokenizer::from_hf_json("{", ""), Error);
  EXPECT_THROW(Tokenizer::from_hf_json(R"({"model": {"type": "Unigram", "vocab": []}})", ""), Error);
  GgufMetadata m;
  m.set("tokenizer.ggml.model", GgufValue::of_str("bert"));
  m.set("tokenizer.ggml.tokens", GgufValue::of_str_array({"a"}));
  EXPECT_THROW(Tokenizer::from_gguf(m), Error);
}

}  // namespace
}  // namespace brisk
