// Fixtures of the fuzz targets: found under $BRISK_SOURCE_DIR, else the source tree of this
// file (a fuzzer may run from any directory).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "tokenizer/tokenizer.h"

namespace fuzz {

inline std::string fixture(const std::string& rel) {
  std::string root;
  if (const char* e = std::getenv("BRISK_SOURCE_DIR")) {
    root = e;
  } else {  // <root>/fuzz/fuzz_fixtures.h; CMake compiles the fuzzers by absolute path
    const std::string f = std::filesystem::absolute(__FILE__).string();
    root = f.substr(0, f.rfind("/fuzz/"));
  }
  return root + "/tests/fixtures/" + rel;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzzer: cannot read %s (set BRISK_SOURCE_DIR)\n", path.c_str());
    std::abort();
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// brisk-nano's byte-level BPE tokenizer (tokenizer.json + tokenizer_config.json).
inline std::unique_ptr<brisk::Tokenizer> nano_tokenizer() {
  return brisk::Tokenizer::from_hf_json(slurp(fixture("brisk-nano/tokenizer.json")),
                                        slurp(fixture("brisk-nano/tokenizer_config.json")));
}

}  // namespace fuzz
