// A Prometheus-style latency histogram: counts per upper bound (seconds), a sum and a count.
#pragma once
#include <cstdint>
#include <vector>

namespace brisk {

struct LatencyHistogram {
  // Upper bounds in seconds; the +Inf bucket is `count`.
  static std::vector<double> default_buckets() {
    return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0};
  }
  std::vector<double> bounds = default_buckets();
  std::vector<uint64_t> counts = std::vector<uint64_t>(bounds.size(), 0);  // per bucket, not cumulative
  double sum = 0;
  uint64_t count = 0;

  void observe(double seconds) {
    for (size_t i = 0; i < bounds.size(); ++i)
      if (seconds <= bounds[i]) {
        ++counts[i];
        break;
      }
    sum += seconds;
    ++count;
  }
  std::vector<uint64_t> cumulative() const {
    std::vector<uint64_t> c(counts.size());
    uint64_t run = 0;
    for (size_t i = 0; i < counts.size(); ++i) c[i] = run += counts[i];
    return c;
  }
};

}  // namespace brisk
