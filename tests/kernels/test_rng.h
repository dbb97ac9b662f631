// The random source of the kernel tests: fresh inputs every run (a failure prints its case).
#pragma once
#include <random>

namespace brisk::test {

inline std::mt19937& rng() {
  static std::mt19937 r(std::random_device{}());
  return r;
}

}  // namespace brisk::test
