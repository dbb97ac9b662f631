// `brisk tokenize` end to end, when the brisk binary has been built in this build dir.
#include <gtest/gtest.h>

#include <cstdio>

#include "test_util.h"

namespace brisk {
namespace {

std::string run(const std::string& args, int* rc) {
  const std::string cmd = std::string(BRISK_BINARY_DIR) + "/brisk tokenize " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

TEST(CmdTokenize, PrintsIdsOnOneLine) {
  if (!test::exists(std::string(BRISK_BINARY_DIR) + "/brisk")) GTEST_SKIP() << "brisk not built";
  const std::string nano = test::fixture("brisk-nano");
  const std::string spm = test::fixture("vocab/ggml-vocab-llama-spm.gguf");
  int rc = 0;
  EXPECT_EQ(run("-m " + nano + " -p 'Hello world'", &rc), "7277 352 2630\n");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(run("-m " + nano + " -p '<|endoftext|>Hello' --parse-special", &rc), "0 7277 352\n");
  EXPECT_EQ(run("-m " + nano + " -p ''", &rc), "\n");
  EXPECT_EQ(run("-m " + spm + " -p 'Hello world'", &rc), "15043 3186\n");
  EXPECT_EQ(run("-m " + spm + " -p 'Hello world' --add-special", &rc), "1 15043 3186\n");
  EXPECT_EQ(run("-m " + nano + " -f " + test::fixture("brisk-nano/tokenizer_config.json"), &rc).back(), '\n');
  EXPECT_EQ(rc, 0);
  run("-m " + nano, &rc);  // no text
  EXPECT_NE(rc, 0);
}

}  // namespace
}  // namespace brisk
