// Bad input at the command line: a precise message on stderr and a non-zero exit, never a
// crash (a crash would show as exit code >= 128).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli.h"

namespace brisk::test {
namespace {

void expect_error(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 1) << "stderr: " << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
}

TEST(BadInput, UnknownCommandAndNoArguments) {
  EXPECT_EQ(run_brisk({}).exit_code, 2);
  CliResult r = run_brisk({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos);
}

TEST(BadInput, MissingModelFile) {
  expect_error(run_brisk({"run", "-m", "/nonexistent/model.gguf", "-p", "hi"}),
               "/nonexistent/model.gguf");
}

TEST(BadInput, TruncatedModelFile) {
  std::string src = source_path("models/brisk-tiny-q8_0.gguf");
  std::string cut = temp_path("cut.gguf");
  for (size_t len : {0ul, 3ul, 100ul, 5000ul, 1000000ul}) {
    {
      std::ifstream in(src, std::ios::binary);
      std::vector<char> buf(len);
      in.read(buf.data(), static_cast<std::streamsize>(len));
      std::ofstream(cut, std::ios::binary).write(buf.data(), static_cast<std::streamsize>(len));
    }
    CliResult r = run_brisk({"run", "-m", cut, "-p", "hi", "-n", "1"});
    EXPECT_EQ(r.exit_code, 1) << "length " << len << ": " << r.err;
    EXPECT_NE(r.err.find("cut.gguf"), std::string::npos) << r.err;
  }
}

TEST(BadInput, PromptLongerThanContext) {
  std::string prompt(400, 'x');
  for (int i = 0; i < 200; ++i) prompt += " word";
  expect_error(run_brisk({"run", "-c", "64", "-p", prompt, "-n", "4"}), "context");
}

TEST(BadInput, NonUtf8Prompt) {
  expect_error(run_brisk({"run", "-p", "abc\xff\xfe", "-n", "1"}), "not valid UTF-8");
  std::string f = temp_path("bad.txt");
  std::ofstream(f, std::ios::binary) << "hello \xc3\x28 world";
  expect_error(run_brisk({"ppl", "-f", f}), "not valid UTF-8");
}

TEST(BadInput, InvalidSamplingParameters) {
  expect_error(run_brisk({"run", "-p", "hi", "--temp", "-1"}), "temperature");
  expect_error(run_brisk({"run", "-p", "hi", "--top-p", "1.5"}), "top_p");
  expect_error(run_brisk({"run", "-p", "hi", "-n", "-5"}), "-n");
}

TEST(BadInput, ConvertRejectsUnknownType) {
  expect_error(run_brisk({"convert", source_path("tests/fixtures/brisk-nano"),
                          temp_path("x.gguf"), "--type", "q3_x"}),
               "q3_x");
}

TEST(Tokenize, EmptyTextPrintsEmptyLine) {
  CliResult r = run_brisk({"tokenize", "-p", ""});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\n");
}

}  // namespace
}  // namespace brisk::test
