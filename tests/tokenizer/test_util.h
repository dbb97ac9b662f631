// Helpers shared by the tokenizer tests: fixture paths and file reading.
#pragma once
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace brisk::test {

inline std::string fixture(const std::string& rel) { return std::string(BRISK_SOURCE_DIR) + "/tests/fixtures/" + rel; }

inline bool exists(const std::string& path) { return std::ifstream(path).good(); }

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path) {
  auto f = GgufFile::open(path);
  return Tokenizer::from_gguf(f->metadata());
}

inline std::unique_ptr<Tokenizer> llama_spm() {
  return load_gguf_tokenizer(fixture("vocab/ggml-vocab-llama-spm.gguf"));
}

inline std::unique_ptr<Tokenizer> load_nano_json() {
  return Tokenizer::from_hf_json(read_file(fixture("brisk-nano/tokenizer.json")),
                                 read_file(fixture("brisk-nano/tokenizer_config.json")));
}

}  // namespace brisk::test
