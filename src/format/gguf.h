// GGUF v2/v3 files: metadata key/values and zero-copy tensor views into a mapped file.
// Format facts: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor_view.h"
#include "util/mapped_file.h"

namespace brisk {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
std::string_view gguf_type_name(GgufType t);

// One metadata value. Scalars: integers and bools in `i` (signed, 64-bit) or `u`
// (UINT64 only), floats in `f`, strings in `s`. Arrays: `type == ARRAY`, element
// type in `elem`, elements in `arr` (each a scalar GgufValue, or a nested array).
struct GgufValue {
  GgufType type = GgufType::UINT32;
  GgufType elem = GgufType::UINT32;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  std::vector<GgufValue> arr;

  static GgufValue of_u32(uint32_t v);
  static GgufValue of_i32(int32_t v);
  static GgufValue of_u64(uint64_t v);
  static GgufValue of_f32(float v);
  static GgufValue of_bool(bool v);
  static GgufValue of_str(std::string v);
  static GgufValue of_str_array(const std::vector<std::string>& v);
  static GgufValue of_f32_array(const std::vector<float>& v);
  static GgufValue of_i32_array(const std::vector<int32_t>& v);
};

// Typed access to a metadata map; the getters throw brisk::Error naming the key when it
// is missing or has a type that cannot be read as asked (any integer type reads as int,
// any float type as double).
class GgufMetadata {
 public:
  std::map<std::string, GgufValue> kv;  // ordered: the writer keeps it stable

  bool has(std::string_view key) const;
  const GgufValue* find(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t def) const;
  double get_float(std::string_view key) const;
  double get_float(std::string_view key, double def) const;
  bool get_bool(std::string_view key, bool def) const;
  std::string get_string(std::string_view key) const;
  std::string get_string(std::string_view key, std::string def) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  void set(std::string key, GgufValue v) { kv[std::move(key)] = std::move(v); }
};

class GgufFile {
 public:
  // Maps and validates the whole file: magic, version (2 or 3), every count, string
  // length, type id, tensor shape, offset and size against the file size, alignment.
  // Throws brisk::Error naming the path, the key or tensor, the byte offset, and
  // what was expected vs found.
  static std::shared_ptr<GgufFile> open(const std::string& path);
  // Same, over bytes in memory (fuzzing, tests); `bytes` must outlive the result.
  static std::shared_ptr<GgufFile> parse(const uint8_t* bytes, size_t size,
                                         std::string name = "<memory>");

  uint32_t version() const { return version_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }  // start of the tensor data section
  const GgufMetadata& metadata() const { return meta_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find_tensor(std::string_view name) const;  // nullptr if absent
  const std::string& path() const { return path_; }
  const std::shared_ptr<MappedFile>& mapping() const { return map_; }

 private:
  std::shared_ptr<MappedFile> map_;
  std::string path_;
  uint32_t version_ = 3;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  GgufMetadata meta_;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

// Writes a GGUF v3 file: metadata in key order, then tensor infos, then data aligned to
// `general.alignment` (32 unless set). Tensor data is taken from each view's pointer.
void write_gguf(const std::string& path, const GgufMetadata& meta,
                const std::vector<TensorView>& tensors);

}  // namespace brisk
