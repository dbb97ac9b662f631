#include <cstdio>

#include "command.h"
#include "kernels/dispatch.h"

// The version, and which CPU kernels this machine runs (the best its CPU has, or BRISK_ISA's).
static int cmd_version(int, char**) {
  std::printf("brisk 0.1.0\nCPU kernels: %s (best on this CPU: %s)\n", brisk::isa_name(brisk::active_isa()),
              brisk::isa_name(brisk::best_isa()));
  return 0;
}
BRISK_COMMAND("version", "print the version", cmd_version);
