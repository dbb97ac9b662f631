// Each `brisk <name>` subcommand lives in its own cmd_<name>.cpp and registers itself
// with BRISK_COMMAND; main.cpp dispatches on argv[1].
#pragma once
#include <functional>
#include <map>
#include <string>

namespace brisk {

using CommandFn = std::function<int(int argc, char** argv)>;  // argv[0] is the command name

struct CommandInfo {
  std::string help;
  CommandFn fn;
};

std::map<std::string, CommandInfo>& commands();

struct CommandRegistrar {
  CommandRegistrar(const std::string& name, const std::string& help, CommandFn fn) {
    commands()[name] = {help, std::move(fn)};
  }
};

#define BRISK_COMMAND_CAT2(a, b) a##b
#define BRISK_COMMAND_CAT(a, b) BRISK_COMMAND_CAT2(a, b)
#define BRISK_COMMAND(name, help, fn) \
  static ::brisk::CommandRegistrar BRISK_COMMAND_CAT(brisk_command_, __COUNTER__)(name, help, fn)

// Path of the bundled default model (models/brisk-tiny-q8_0.gguf next to the source or
// install tree); BRISK_MODEL in the environment overrides it.
std::string default_model_path();

}  // namespace brisk
