// GGUF v3 writer. The layout is the one ggml itself produces and insists on when it
// loads a file: tensor data in tensor-info order, each tensor padded to the alignment
// (the last one too), so that llama.cpp accepts what we write.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "format/gguf.h"
#include "util/error.h"

namespace brisk {

namespace {

class Out {
 public:
  Out(const std::string& path) : path_(path) {
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) fail("cannot create '{}': {}", path, std::strerror(errno));
  }
  ~Out() {
    if (f_) std::fclose(f_);
  }
  void bytes(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n)
      fail("writing '{}' at byte offset {}: {}", path_, pos_, std::strerror(errno));
    pos_ += n;
  }
  template <class T>
  void put(T v) {
    bytes(&v, sizeof v);
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(size_t align) {
    static const uint8_t zeros[4096] = {};
    while (pos_ % align) bytes(zeros, std::min(align - pos_ % align, sizeof zeros));
  }
  void close() {
    FILE* f = f_;
    f_ = nullptr;
    if (std::fclose(f) != 0) fail("closing '{}': {}", path_, std::strerror(errno));
  }
  size_t pos() const { return pos_; }

 private:
  std::string path_;
  FILE* f_ = nullptr;
  size_t pos_ = 0;
};

void write_value(Out& o, const GgufValue& v, const std::string& what) {
  switch (v.type) {
    case GgufType::UINT8: o.put<uint8_t>(static_cast<uint8_t>(v.i)); break;
    case GgufType::INT8: o.put<int8_t>(static_cast<int8_t>(v.i)); break;
    case GgufType::UINT16: o.put<uint16_t>(static_cast<uint16_t>(v.i)); break;
    case GgufType::INT16: o.put<int16_t>(static_cast<int16_t>(v.i)); break;
    case GgufType::UINT32: o.put<uint32_t>(static_cast<uint32_t>(v.i)); break;
    case GgufType::INT32: o.put<int32_t>(static_cast<int32_t>(v.i)); break;
    case GgufType::FLOAT32: o.put<float>(static_cast<float>(v.f)); break;
    case GgufType::BOOL: o.put<uint8_t>(v.i != 0 || v.u != 0); break;
    case GgufType::STRING: o.str(v.s); break;
    // of_u64 fills both fields; a hand-built value may have only `i` set.
    case GgufType::UINT64: o.put<uint64_t>(v.u ? v.u : static_cast<uint64_t>(v.i)); break;
    case GgufType::INT64: o.put<int64_t>(v.i); break;
    case GgufType::FLOAT64: o.put<double>(v.f); break;
    case GgufType::ARRAY:
      o.put<uint32_t>(static_cast<uint32_t>(v.elem));
      o.put<uint64_t>(v.arr.size());
      for (size_t k = 0; k < v.arr.size(); ++k) {
        if (v.arr[k].type != v.elem)
          fail("write_gguf: {}[{}] has type {}, but the array holds {}", what, k,
               gguf_type_name(v.arr[k].type), gguf_type_name(v.elem));
        write_value(o, v.arr[k], what);
      }
      break;
    default:
      fail("write_gguf: {} has unknown GGUF value type {}", what, static_cast<uint32_t>(v.type));
  }
}

size_t alignment_of(const GgufMetadata& meta) {
  int64_t a = meta.get_int("general.alignment", 32);
  if (a <= 0 || (a & (a - 1)) != 0)
    fail("write_gguf: general.alignment must be a nonzero power of two, found {}", a);
  return static_cast<size_t>(a);
}

void check_tensor(const TensorView& t, std::set<std::string_view>& seen) {
  if (!seen.insert(t.name).second) fail("write_gguf: duplicate tensor name '{}'", t.name);
  if (t.n_dims < 1 || t.n_dims > 4)
    fail("write_gguf: tensor '{}' has n_dims {} (expected 1..4)", t.name, t.n_dims);
  for (int d = 0; d < 4; ++d)
    if (t.ne[d] <= 0 || (d >= t.n_dims && t.ne[d] != 1))
      fail("write_gguf: tensor '{}' has an invalid shape {} for n_dims {}", t.name, t.shape_str(),
           t.n_dims);
  const DTypeInfo& di = info(t.type);
  if (t.ne[0] % di.block_elems != 0)
    fail("write_gguf: tensor '{}' row length {} is not a multiple of the {} block size {}",
         t.name, t.ne[0], di.name, di.block_elems);
  if (!t.data) fail("write_gguf: tensor '{}' has no data", t.name);
}

}  // namespace

void write_gguf(const std::string& path, const GgufMetadata& meta,
                const std::vector<TensorView>& tensors) {
  const size_t align = alignment_of(meta);
  std::set<std::string_view> seen;
  for (const auto& t : tensors) check_tensor(t, seen);

  // Write to a temporary name and rename at the end: a failed write never leaves a
  // half-written file under the real name.
  const std::string tmp = path + ".tmp";
  try {
    Out o(tmp);
    o.bytes("GGUF", 4);
    o.put<uint32_t>(3);
    o.put<uint64_t>(tensors.size());
    o.put<uint64_t>(meta.kv.size());
    for (const auto& [key, v] : meta.kv) {
      o.str(key);
      o.put<uint32_t>(static_cast<uint32_t>(v.type));
      write_value(o, v, "metadata key '" + key + "'");
    }
    uint64_t off = 0;
    for (const auto& t : tensors) {
      o.str(t.name);
      o.put<uint32_t>(static_cast<uint32_t>(t.n_dims));
      for (int d = 0; d < t.n_dims; ++d) o.put<uint64_t>(static_cast<uint64_t>(t.ne[d]));
      o.put<uint32_t>(static_cast<uint32_t>(t.type));
      o.put<uint64_t>(off);
      off += (t.nbytes() + align - 1) / align * align;
    }
    o.pad_to(align);
    for (const auto& t : tensors) {
      o.bytes(t.data, t.nbytes());
      o.pad_to(align);
    }
    o.close();
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    fail("cannot rename '{}' to '{}': {}", tmp, path, std::strerror(e));
  }
}

}  // namespace brisk
