// A bounds-checked little-endian cursor over a byte range. Every read checks the
// remaining length first, so a truncated or corrupt file ends in brisk::Error (naming
// the file, what was being read and at which byte offset), never in an out-of-bounds read.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "util/error.h"

namespace brisk {

static_assert(std::endian::native == std::endian::little,
              "GGUF and safetensors are little-endian; brisk reads them in place");

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, std::string_view name)
      : data_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - pos_; }
  std::string_view name() const { return name_; }

  // `what` describes the field for the error message ("tensor count", "key 'x' value").
  void need(size_t n, std::string_view what) const {
    if (n > remaining())
      fail("{}: truncated file: reading {} at byte offset {} needs {} bytes, only {} left",
           name_, what, pos_, n, remaining());
  }

  template <class T>
  T read(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // memcpy: no alignment assumption
    pos_ += sizeof(T);
    return v;  // GGUF is little-endian, as is every host brisk targets
  }

  std::string_view bytes(size_t n, std::string_view what) {
    need(n, what);
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string_view name_;
};

}  // namespace brisk
