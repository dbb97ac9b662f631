// Runs the built `brisk` binary as a user would and captures what it prints.
#pragma once
#include <string>
#include <vector>

namespace brisk::test {

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

// args are passed verbatim (no shell); stdin_text is fed to its standard input.
CliResult run_brisk(const std::vector<std::string>& args, const std::string& stdin_text = "");

std::string source_path(const std::string& rel);  // BRISK_SOURCE_DIR/rel
std::string shared_path(const std::string& rel);  // BRISK_SOURCE_DIR/../shared/rel or ""
std::string temp_path(const std::string& name);   // a fresh path under the test temp dir
// A reference model: brisk-nano from the fixtures, the others from ../shared/models.
std::string model_dir(const std::string& name);

}  // namespace brisk::test
