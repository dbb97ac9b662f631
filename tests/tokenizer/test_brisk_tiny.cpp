// brisk's own tokenizer (16,384-token byte-level BPE): the tokenizer.json path and the
// GGUF path must agree token for token, and both must agree with Hugging Face.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace brisk {
namespace {

std::string dev_text() {
  std::string t = test::read_file(test::fixture("dev.txt"));
  // llama-perplexity's protocol (reference.json): one trailing newline removed.
  if (!t.empty() && t.back() == '\n') t.pop_back();
  return t;
}

TEST(BriskTiny, JsonAndGgufAgreeOnAllOfDevTxt) {
  const std::string gguf = std::string(BRISK_SOURCE_DIR) + "/models/brisk-tiny-q8_0.gguf";
  if (!test::exists(gguf)) GTEST_SKIP() << "models/brisk-tiny-q8_0.gguf is not present";
  auto from_json = test::load_nano_json();
  auto from_gguf = test::load_gguf_tokenizer(gguf);
  const std::string text = dev_text();
  ASSERT_EQ(text.size(), 814104u);

  const auto t0 = std::chrono::steady_clock::now();
  const auto a = from_json->encode(text, false, false);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto b = from_gguf->encode(text, false, false);
  EXPECT_EQ(a.size(), 235004u);  // llama.cpp and HF count the same
  EXPECT_EQ(a, b);
  const std::vector<int32_t> first16 = {2062, 1231, 423, 2579, 470, 596, 2224, 1365,
                                        350, 1201, 350, 596, 4768, 571, 2009, 199};
  ASSERT_GE(a.size(), 16u);
  EXPECT_EQ(std::vector<int32_t>(a.begin(), a.begin() + 16), first16);
  EXPECT_LT(secs, 2.0) << "encoding 814 KB took " << secs << " s";
  EXPECT_EQ(from_json->decode(a), text);  // byte-level BPE is lossless
}

void check_reference_prompts(const std::string& path) {
  auto tok = test::load_nano_json();
  const auto ref = nlohmann::json::parse(test::read_file(path));
  ASSERT_GE(ref["prompts"].size(), 8u);
  for (const auto& p : ref["prompts"]) {
    const auto want = p["prompt_ids"].get<std::vector<int32_t>>();
    const std::string text = p["text"].get<std::string>();
    EXPECT_EQ(tok->encode(text, false, false), want) << p["name"];
    EXPECT_EQ(tok->encode(text, true, true), want) << "no BOS for brisk: " << p["name"];
    EXPECT_EQ(tok->decode(want), text);
  }
}

TEST(BriskTiny, MatchesHuggingFaceOnNanoReferencePrompts) {
  check_reference_prompts(test::fixture("brisk-nano/reference.json"));
}

TEST(BriskTiny, MatchesHuggingFaceOnTinyReferencePrompts) {
  const std::string path = std::string(BRISK_SOURCE_DIR) + "/../shared/models/brisk-tiny/reference.json";
  if (!test::exists(path)) GTEST_SKIP() << "../shared/models/brisk-tiny is not present";
  check_reference_prompts(path);
}

TEST(BriskTiny, SpecialFlagsFromConfig) {
  auto tok = test::load_nano_json();
  EXPECT_EQ(tok->n_vocab(), 16384);
  EXPECT_EQ(tok->bos(), 0);
  EXPECT_EQ(tok->eos(), 0);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_TRUE(tok->is_eog(0));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_EQ(tok->chat_template(), "");
}

}  // namespace
}  // namespace brisk

namespace brisk {
namespace {

TEST(BriskTiny, JsonGivesTheKeysOfTheShippedGguf) {
  // What `brisk convert` writes must match what llama.cpp's converter wrote.
  const std::string gguf = std::string(BRISK_SOURCE_DIR) + "/models/brisk-tiny-q8_0.gguf";
  if (!test::exists(gguf)) GTEST_SKIP() << "models/brisk-tiny-q8_0.gguf is not present";
  GgufMetadata m;
  add_gguf_tokenizer_metadata(test::read_file(test::fixture("brisk-nano/tokenizer.json")),
                              test::read_file(test::fixture("brisk-nano/tokenizer_config.json")), m);
  const auto f = GgufFile::open(gguf);
  const GgufMetadata& g = f->metadata();
  for (const char* k : {"tokenizer.ggml.model", "tokenizer.ggml.pre"})
    EXPECT_EQ(m.get_string(k), g.get_string(k)) << k;
  for (const char* k : {"tokenizer.ggml.tokens", "tokenizer.ggml.merges"})
    EXPECT_EQ(m.get_string_array(k), g.get_string_array(k)) << k;
  EXPECT_EQ(m.get_int_array("tokenizer.ggml.token_type"), g.get_int_array("tokenizer.ggml.token_type"));
  for (const char* k : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"})
    EXPECT_EQ(m.get_int(k), g.get_int(k)) << k;
  EXPECT_EQ(m.get_bool("tokenizer.ggml.add_bos_token", true), false);
  EXPECT_EQ(m.get_bool("tokenizer.ggml.add_eos_token", true), false);
}

}  // namespace
}  // namespace brisk
