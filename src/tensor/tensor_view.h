// A non-owning view of a weight tensor (usually straight into a mapped model file).
// Shapes follow GGUF: ne[0] is the length of a row (the contiguous, innermost
// dimension), ne[1] the number of rows, and so on. A PyTorch [out, in] matrix is
// ne = {in, out}.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "tensor/dtype.h"

namespace brisk {

struct TensorView {
  std::string name;
  DType type = DType::F32;
  int n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  const void* data = nullptr;
  // 1: plain rows. kernels/packed_matrix.h: rows interleaved in groups of this many (only
  // the CPU matmul reads such a view; row(r) is valid for r a multiple of the group).
  int row_group = 1;

  int64_t elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  size_t row_size() const { return row_bytes(type, ne[0]); }
  size_t nbytes() const { return row_size() * static_cast<size_t>(rows()); }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_size();
  }
  std::string shape_str() const;  // "[384, 1024]"
};

}  // namespace brisk
