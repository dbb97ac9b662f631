// The `brisk` command: dispatches to the subcommands registered in cmd_*.cpp and turns
// every brisk::Error into a message on stderr and a non-zero exit.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "command.h"
#include "util/error.h"

namespace brisk {

std::map<std::string, CommandInfo>& commands() {
  static std::map<std::string, CommandInfo> m;
  return m;
}

std::string default_model_path() {
  if (const char* e = std::getenv("BRISK_MODEL")) return e;
  return BRISK_DEFAULT_MODEL;
}

}  // namespace brisk

static void usage() {
  std::fprintf(stderr, "usage: brisk <command> [options]   (brisk <command> --help)\n\ncommands:\n");
  for (auto& [name, c] : brisk::commands())
    std::fprintf(stderr, "  %-10s %s\n", name.c_str(), c.help.c_str());
}

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  auto it = brisk::commands().find(argv[1]);
  if (it == brisk::commands().end()) {
    std::fprintf(stderr, "brisk: unknown command '%s'\n", argv[1]);
    usage();
    return 2;
  }
  try {
    return it->second.fn(argc - 1, argv + 1);
  } catch (const brisk::Error& e) {
    std::fprintf(stderr, "brisk %s: error: %s\n", argv[1], e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "brisk %s: error: out of memory\n", argv[1]);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brisk %s: internal error: %s\n", argv[1], e.what());
    return 1;
  }
}
