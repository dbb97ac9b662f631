// llama.cpp's test-tokenizer-0 cases: every string of ggml-vocab-*.gguf.inp must encode
// to the ids on the matching line of .out. The .out files were written with
// add_special = false (no BOS in any line, though llama-spm and deepseek-coder add
// one) and parse_special = true.
#include <gtest/gtest.h>

#include "test_util.h"

namespace brisk {
namespace {

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> load_cases(const std::string& base) {
  // Strings are separated by "\n__ggml_vocab_test__\n"; the file ends with one, so the
  // last split part is empty and not a case. A string may itself be empty or be
  // made of newlines only.
  const std::string inp = test::read_file(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  for (size_t hit; (hit = inp.find(sep, pos)) != std::string::npos; pos = hit + sep.size())
    texts.push_back(inp.substr(pos, hit - pos));
  EXPECT_EQ(pos, inp.size()) << "trailing text after the last separator";

  std::istringstream out(test::read_file(base + ".out"));
  std::vector<Case> cases;
  std::string line;
  for (const auto& t : texts) {
    EXPECT_TRUE(std::getline(out, line)) << "missing .out line";
    Case c{t, {}};
    std::istringstream ls(line);
    for (int32_t id; ls >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

class VocabFile : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabFile, EncodesEveryTestStringLikeLlamaCpp) {
  const std::string base = test::fixture(std::string("vocab/ggml-vocab-") + GetParam() + ".gguf");
  auto tok = test::load_gguf_tokenizer(base);
  const auto cases = load_cases(base);
  ASSERT_EQ(cases.size(), 46u);
  for (const auto& c : cases) {
    EXPECT_EQ(tok->encode(c.text, /*add_special=*/false, /*parse_special=*/true), c.ids)
        << "text: '" << c.text << "'";
    EXPECT_EQ(tok->encode(c.text, false, false), c.ids) << "text: '" << c.text << "'";
  }
}

TEST_P(VocabFile, DecodeGivesTheInputBack) {
  const std::string base = test::fixture(std::string("vocab/ggml-vocab-") + GetParam() + ".gguf");
  auto tok = test::load_gguf_tokenizer(base);
  for (const auto& c : load_cases(base)) {
    // Byte-level BPE and byte-fallback SPM lose nothing; decode drops only the prefix
    // space SPM added, so the text's own leading spaces come back.
    EXPECT_EQ(tok->decode(c.ids), c.text) << "text: '" << c.text << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, VocabFile,
                         ::testing::Values("gpt-2", "llama-spm", "deepseek-coder", "falcon"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace brisk
