// This process's memory as the kernel counts it (Linux /proc/self/status), to show that
// weights are mapped rather than copied: a mapped file's pages count as RssFile, copies
// and allocations as RssAnon.
#pragma once
#include <cstdint>

namespace brisk {

struct ProcessMemory {
  int64_t peak_rss_kb = 0;  // VmHWM
  int64_t rss_anon_kb = 0;  // RssAnon: heap, KV cache, activations
  int64_t rss_file_kb = 0;  // RssFile: mapped model pages in memory
};

ProcessMemory process_memory();  // zeros where /proc is unavailable

}  // namespace brisk
