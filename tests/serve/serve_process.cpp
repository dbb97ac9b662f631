#include "serve_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

extern char** environ;

namespace brisk::test {

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string temp_file(const std::string& name) {
  static int counter = 0;
  std::filesystem::path d = std::filesystem::temp_directory_path() / ("brisk-serve-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(d);
  return (d / (name + std::to_string(counter++))).string();
}

}  // namespace

ServeProcess::ServeProcess(std::vector<std::string> args, std::string api_key)
    : api_key_(std::move(api_key)) {
  out_path_ = temp_file("serve.out");
  err_path_ = temp_file("serve.err");
  std::vector<std::string> argv_s = {BRISK_BINARY_DIR "/brisk", "serve", "--port", "0"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  if (!api_key_.empty()) argv_s.insert(argv_s.end(), {"--api-key", api_key_});
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    error_ = "cannot start " + argv_s[0];
    return;
  }
  pid_ = pid;
  std::regex re(R"(listening on http://[^:]+:(\d+))");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int port = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      error_ = "brisk serve exited early: " + slurp(err_path_);
      return;
    }
    std::smatch m;
    std::string out = slurp(out_path_);
    if (!port && std::regex_search(out, m, re)) port = std::stoi(m[1]);
    if (port) {
      httplib::Client c("127.0.0.1", port);
      if (!api_key_.empty()) c.set_bearer_token_auth(api_key_.c_str());
      auto r = c.Get("/health");
      if (r && r->status == 200) {
        port_ = port;
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  error_ = "brisk serve did not become healthy in 60 s: " + slurp(err_path_);
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0 && stop() < 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string ServeProcess::log() const { return slurp(err_path_); }

httplib::Client ServeProcess::client() const {
  httplib::Client c("127.0.0.1", port_);
  if (!api_key_.empty()) c.set_bearer_token_auth(api_key_.c_str());
  c.set_read_timeout(120, 0);
  c.set_write_timeout(60, 0);
  return c;
}

int ServeProcess::stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 400; ++i) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

double ServeProcess::metric(const std::string& name) const {
  httplib::Client c = client();
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return NAN;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::stod(line.substr(name.size() + 1));
  }
  return NAN;
}

bool ServeProcess::wait_idle() const {
  for (int i = 0; i < 400; ++i) {
    if (metric("brisk_kv_blocks_used") == 0 && metric("brisk_running_sequences") == 0 &&
        metric("brisk_queue_depth") == 0)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

HttpResult post_raw(httplib::Client& cli, const std::string& path, const std::string& body,
                    const std::string& content_type) {
  HttpResult out;
  auto r = cli.Post(path.c_str(), body, content_type.c_str());
  if (!r) {
    out.body = "transport error: " + httplib::to_string(r.error());
    return out;
  }
  out.status = r->status;
  out.body = r->body;
  out.json = nlohmann::json::parse(r->body, nullptr, false);
  if (out.json.is_discarded()) out.json = nullptr;
  return out;
}

}  // namespace brisk::test
