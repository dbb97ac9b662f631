// Drives `brisk serve` with the official `openai` npm client (tests/serve/openai_e2e.mjs).
// The client is installed into tests/serve/node_modules (npm ci, pinned by
// package-lock.json) the first time; the tests are skipped when node/npm are missing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "serve_process.h"

namespace brisk::test {
namespace {

const std::string kDir = BRISK_SOURCE_DIR "/tests/serve";

bool have(const char* tool) {
  return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0;
}

// Runs a shell command; returns its exit status and output (stdout + stderr).
int shell(const std::string& cmd, std::string& out) {
  std::string log = std::filesystem::temp_directory_path() / ("brisk-serve-node-" + std::to_string(getpid()) + ".log");
  int rc = std::system((cmd + " >" + log + " 2>&1").c_str());
  std::ifstream f(log);
  std::stringstream s;
  s << f.rdbuf();
  out = s.str();
  std::filesystem::remove(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

// npm ci once, under a lock so parallel ctest processes do not install over each other.
std::string ensure_openai_client() {
  std::string lock_path = BRISK_BINARY_DIR "/serve-npm.lock";
  int fd = open(lock_path.c_str(), O_CREAT | O_RDWR, 0644);
  if (fd >= 0) flock(fd, LOCK_EX);
  std::string err, out;
  if (!std::filesystem::exists(kDir + "/node_modules/openai/package.json")) {
    int rc = shell("cd '" + kDir + "' && npm ci --no-audit --no-fund", out);
    if (rc != 0) err = "npm ci in tests/serve failed (the openai package is needed):\n" + out;
  }
  if (fd >= 0) close(fd);
  return err;
}

class OpenAIClient : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!have("node") || !have("npm")) {
      skip_ = "node and npm are not installed (scripts/install-deps.sh installs them)";
      return;
    }
    setup_error_ = ensure_openai_client();
    if (setup_error_.empty()) server_ = new ServeProcess({"--parallel", "32"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
    ASSERT_TRUE(server_ && server_->ok()) << (server_ ? server_->error() : "");
  }
  void run_case(const std::string& name) {
    std::string out;
    std::string cmd = "cd '" + kDir + "' && BRISK_URL='" + server_->url() + "' BRISK_BIN='" BRISK_BINARY_DIR
                      "/brisk' node openai_e2e.mjs " + name;
    int rc = shell(cmd, out);
    EXPECT_EQ(rc, 0) << out << "\nserver log:\n" << server_->log();
    EXPECT_TRUE(server_->wait_idle()) << "KV blocks still in use: " << server_->metric("brisk_kv_blocks_used");
  }
  static ServeProcess* server_;
  static std::string skip_, setup_error_;
};
ServeProcess* OpenAIClient::server_ = nullptr;
std::string OpenAIClient::skip_, OpenAIClient::setup_error_;

TEST_F(OpenAIClient, Models) { run_case("models"); }
TEST_F(OpenAIClient, Completions) { run_case("completions"); }
TEST_F(OpenAIClient, CompletionsStream) { run_case("completions_stream"); }
TEST_F(OpenAIClient, Chat) { run_case("chat"); }
TEST_F(OpenAIClient, ChatStream) { run_case("chat_stream"); }
TEST_F(OpenAIClient, StopStrings) { run_case("stop_strings"); }
TEST_F(OpenAIClient, SeedDeterminism) { run_case("seed_determinism"); }
TEST_F(OpenAIClient, Logprobs) { run_case("logprobs"); }
TEST_F(OpenAIClient, LogitBias) { run_case("logit_bias"); }
TEST_F(OpenAIClient, GreedyEqualsBriskRun) { run_case("greedy_equals_run"); }
TEST_F(OpenAIClient, Concurrent32StreamsEqualAlone) { run_case("concurrent_32"); }
TEST_F(OpenAIClient, ErrorsThroughClient) { run_case("errors_through_client"); }

}  // namespace
}  // namespace brisk::test
