#include "util/process_memory.h"

#include <cstdio>
#include <cstring>

namespace brisk {

ProcessMemory process_memory() {
  ProcessMemory m;
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return m;
  char line[256];
  while (std::fgets(line, sizeof line, f)) {
    long long v;
    if (std::sscanf(line, "VmHWM: %lld", &v) == 1) m.peak_rss_kb = v;
    else if (std::sscanf(line, "RssAnon: %lld", &v) == 1) m.rss_anon_kb = v;
    else if (std::sscanf(line, "RssFile: %lld", &v) == 1) m.rss_file_kb = v;
  }
  std::fclose(f);
  return m;
}

}  // namespace brisk
