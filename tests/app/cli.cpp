#include "cli.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

namespace brisk::test {

static std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string model_dir(const std::string& name) {
  if (name == "brisk-nano") return source_path("tests/fixtures/brisk-nano");
  return shared_path("models/" + name);
}

std::string temp_path(const std::string& name) {
  static const std::string dir = [] {
    std::string d = std::filesystem::temp_directory_path() / ("brisk-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir + "/" + name;
}

CliResult run_brisk(const std::vector<std::string>& args, const std::string& stdin_text) {
  static int counter = 0;
  std::string base = temp_path("cli" + std::to_string(counter++));
  std::string in = base + ".in", out = base + ".out", err = base + ".err";
  std::ofstream(in, std::ios::binary) << stdin_text;

  std::vector<std::string> argv_s = {BRISK_BINARY_DIR "/brisk"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  CliResult r;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) return r;
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  waitpid(pid, &status, 0);
  // A crash (signal) is reported as 128 + signal, like a shell, so tests can tell it apart.
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::string source_path(const std::string& rel) { return std::string(BRISK_SOURCE_DIR) + "/" + rel; }

std::string shared_path(const std::string& rel) {
  std::string p = std::string(BRISK_SOURCE_DIR) + "/../shared/" + rel;
  return std::filesystem::exists(p) ? p : "";
}

}  // namespace brisk::test
