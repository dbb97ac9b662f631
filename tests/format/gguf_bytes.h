// Hand-assembled GGUF bytes for tests: lets a test write exactly the (possibly corrupt)
// header it wants to feed the reader, field by field.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace brisk::test {

struct Bytes {
  std::vector<uint8_t> b;

  template <class T>
  Bytes& put(T v) {
    size_t n = b.size();
    b.resize(n + sizeof v);
    std::memcpy(b.data() + n, &v, sizeof v);
    return *this;
  }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::string& s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  // A key with a u32 value.
  Bytes& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  // A tensor info: name, dims, ggml type, offset into the data section.
  Bytes& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t off) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) u64(d);
    return u32(type).u64(off);
  }
  Bytes& pad(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

}  // namespace brisk::test
