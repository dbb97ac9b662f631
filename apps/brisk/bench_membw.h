// Memory read bandwidth of this machine, as `brisk bench --membw` measures it and as the
// bench rows' roofline share divides by: a large buffer (default 1 GiB, far beyond the
// last-level cache) read end to end with the widest vector loads the CPU has (AVX-512,
// else AVX2, else 64-bit scalar), split into contiguous equal parts across T threads.
#pragma once
#include <cstddef>
#include <vector>

namespace brisk {

struct MembwResult {
  int threads = 0;
  size_t bytes = 0;            // buffer size
  const char* isa = "";        // loads used: "avx512", "avx2" or "scalar"
  std::vector<double> gbps;    // one per repetition (10^9 bytes/s)
  double median = 0, min = 0, max = 0;
};

// Runs `reps` timed reads after one untimed pass (which also faults the pages in).
MembwResult measure_membw(int threads, size_t bytes, int reps);

}  // namespace brisk
