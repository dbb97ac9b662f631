// Element types of weights and activations, numbered as GGUF/ggml number them, with
// the block geometry of each (GGUF-exact layouts are in block_layouts.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace brisk {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct DTypeInfo {
  std::string_view name;  // "f32", "q4_k", ... (lower case, as on the command line)
  int64_t block_elems;    // elements per block (1 for plain types)
  size_t block_bytes;     // bytes per block
  bool supported;         // brisk can dequantize / compute with it
};

// Info for a GGUF type id; std::nullopt for ids that ggml does not define.
std::optional<DTypeInfo> dtype_info(uint32_t ggml_type);
const DTypeInfo& info(DType t);  // t must be a defined type
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);  // "q8_0" -> Q8_0

// Bytes of a row of n elements; n must be a multiple of the block size (checked by callers).
inline size_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& i = info(t);
  return static_cast<size_t>(n / i.block_elems) * i.block_bytes;
}

}  // namespace brisk
