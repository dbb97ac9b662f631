// Weight matrices repacked once, at load time, for the CPU's 8-bit integer kernels and its
// 16-bit float kernels.
//
// A GGUF row keeps each block's scales next to its quants, one row after another, so a
// SIMD kernel must spend shuffles to line rows up with lanes and reduce across lanes at
// the end. Packed, 16 rows are interleaved block by block so that one 64-byte vector holds
// 4 quant bytes of each of the 16 rows (one 32-bit lane per row) and the 16 rows' scales
// of a block sit together. A kernel then multiplies a block of 16 rows with broadcast
// activations (vpdpbusd) and every lane is one row's result: no shuffles, no horizontal
// sums. llama.cpp's CPU "repack" buffers follow the same idea.
//
// A group of 16 rows is stored block after block (block = 32 values for Q4_0/Q8_0, a
// 256-value super-block for Q4_K/Q6_K). In a block, "chunk c" is 64 bytes whose bytes
// 4r..4r+3 are bytes 4c..4c+3 of row r's quant array, and per-row scalars are 16-entry
// arrays (row 0..15):
//   Q4_0 (288 B):  d[16] fp16 | qs: 4 chunks (low nibble = value j, high = value j + 16)
//   Q8_0 (544 B):  d[16] fp16 | qs: 8 chunks, each byte q + 128 (unsigned, for vpdpbusd)
//   Q4_K (2368 B): d[16], dmin[16] fp16 | sc[8][16], m[8][16] u8 (the 6-bit sub-block
//                  scales and mins unpacked: 64 bytes more than 16 GGUF blocks) | qs: 32 chunks
//   Q6_K (3360 B): d[16] fp16 | scales[16][16] i8 | ql: 32 chunks | qh: 16 chunks
//   F16, BF16 (32 B, one column): the 16 rows' values of that column. A row-major 16-bit
//                  GEMV reads a few short rows side by side and sums each across lanes; packed,
//                  a 16-row group is one long stream (brisk-small's rows are 1-3 KB) and a
//                  vector of one column multiplies a broadcast activation.
// Rows past the end of the matrix are padded with zero scales (zero values), so they
// compute zeros.
#pragma once
#include <cstddef>
#include <cstdint>
#include "tensor/tensor_view.h"
#include "util/huge_page_buffer.h"

namespace brisk {

constexpr int kPackRows = 16;

struct PackedMatrix {
  TensorView view;  // same name, type and shape as the source; row_group == kPackRows
  HugePageBuffer storage;
};

// Whether W has a packed kernel (Q4_0, Q8_0, Q4_K, Q6_K, F16, BF16 matrices).
bool packable(const TensorView& W);

// Bytes of W's packed copy (W must be packable).
size_t packed_bytes(const TensorView& W);

// Writes the packed copy of W (which must be packable) to dst (packed_bytes(W) bytes,
// 64-byte aligned) and returns its view. Uses the global thread pool.
TensorView pack_matrix_into(const TensorView& W, uint8_t* dst);

// The packed copy of W in a buffer of its own.
PackedMatrix pack_matrix(const TensorView& W);

// Bytes of one packed block of 16 rows, and of a whole group of 16 rows of W.
size_t packed_block_bytes(DType t);
size_t packed_group_bytes(const TensorView& W);

}  // namespace brisk
