#include <cstdio>

#include "command.h"

static int cmd_version(int, char**) {
  std::printf("brisk 0.1.0\n");
  return 0;
}
BRISK_COMMAND("version", "print the version", cmd_version);
