#include "kernels/packed_matrix.h"

#include <algorithm>
#include <cstring>

#include "tensor/block_layouts.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace brisk {

namespace {

// Spreads `n` bytes of a row's quant array into chunk layout (bytes 4c..4c+3 -> chunk c,
// lane r), XORing each with `flip`.
void put_chunks(uint8_t* dst, int r, const uint8_t* src, size_t n, uint8_t flip) {
  for (size_t j = 0; j < n; ++j)
    dst[64 * (j / 4) + 4 * r + j % 4] = static_cast<uint8_t>((src ? src[j] : 0) ^ flip);
}

void put_half(uint8_t* dst, int r, const uint8_t* src) {  // fp16 scalar; 0 past the end
  uint16_t v = 0;
  if (src) std::memcpy(&v, src, 2);
  std::memcpy(dst + 2 * r, &v, 2);
}

// Row r's block `src` (null: padding row) into packed block `dst`.
void pack_block(DType t, const uint8_t* src, uint8_t* dst, int r) {
  switch (t) {
    case DType::Q4_0: {
      put_half(dst, r, src);
      put_chunks(dst + 32, r, src ? src + 2 : nullptr, 16, 0);
      return;
    }
    case DType::Q8_0: {
      put_half(dst, r, src);
      put_chunks(dst + 32, r, src ? src + 2 : nullptr, 32, 0x80);
      return;
    }
    case DType::Q4_K: {
      const auto* b = reinterpret_cast<const BlockQ4_K*>(src);
      put_half(dst, r, b ? reinterpret_cast<const uint8_t*>(&b->d) : nullptr);
      put_half(dst + 32, r, b ? reinterpret_cast<const uint8_t*>(&b->dmin) : nullptr);
      for (int j = 0; j < 8; ++j) {
        uint8_t sc = 0, m = 0;
        if (b) q4k_scale_min(j, b->scales, &sc, &m);
        dst[64 + 16 * j + r] = sc;
        dst[192 + 16 * j + r] = m;
      }
      put_chunks(dst + 320, r, b ? b->qs : nullptr, 128, 0);
      return;
    }
    case DType::Q6_K: {
      const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
      put_half(dst, r, b ? reinterpret_cast<const uint8_t*>(&b->d) : nullptr);
      for (int s = 0; s < 16; ++s) dst[32 + 16 * s + r] = b ? static_cast<uint8_t>(b->scales[s]) : 0;
      put_chunks(dst + 288, r, b ? b->ql : nullptr, 128, 0);
      put_chunks(dst + 2336, r, b ? b->qh : nullptr, 64, 0);
      return;
    }
    default: fail("pack_matrix: no packed layout for type {}", dtype_name(t));
  }
}

}  // namespace

size_t packed_block_bytes(DType t) {
  switch (t) {
    case DType::Q4_0: return 16 * sizeof(BlockQ4_0);
    case DType::Q8_0: return 16 * sizeof(BlockQ8_0);
    case DType::Q4_K: return 16 * sizeof(BlockQ4_K) + 64;
    case DType::Q6_K: return 16 * sizeof(BlockQ6_K);
    case DType::F16:
    case DType::BF16: return 16 * 2;
    default: return 0;
  }
}

size_t packed_group_bytes(const TensorView& W) {
  return static_cast<size_t>(W.ne[0] / info(W.type).block_elems) * packed_block_bytes(W.type);
}

bool packable(const TensorView& W) {
  return W.row_group == 1 && packed_block_bytes(W.type) != 0 && W.ne[0] % info(W.type).block_elems == 0;
}

size_t packed_bytes(const TensorView& W) {
  return static_cast<size_t>((W.rows() + kPackRows - 1) / kPackRows) * packed_group_bytes(W);
}

TensorView pack_matrix_into(const TensorView& W, uint8_t* out) {
  if (!packable(W)) fail("pack_matrix: tensor '{}' of type {} cannot be packed", W.name, dtype_name(W.type));
  const size_t bb = info(W.type).block_bytes, pbb = packed_block_bytes(W.type);
  const int64_t rows = W.rows(), nb = W.ne[0] / info(W.type).block_elems;
  const int64_t n_groups = (rows + kPackRows - 1) / kPackRows;
  const size_t gb = packed_group_bytes(W);

  TensorView v = W;
  v.data = out;
  v.row_group = kPackRows;
  if (W.type == DType::F16 || W.type == DType::BF16) {  // a 16 x k transpose of 2-byte values
    ThreadPool::global().parallel_for(n_groups, [&](int64_t g0, int64_t g1, int) {
      for (int64_t g = g0; g < g1; ++g) {
        auto* dst = reinterpret_cast<uint16_t*>(out + g * gb);
        for (int r = 0; r < kPackRows && g * kPackRows + r < rows; ++r) {
          const auto* src = reinterpret_cast<const uint16_t*>(W.row(g * kPackRows + r));
          for (int64_t c = 0; c < nb; ++c) dst[kPackRows * c + r] = src[c];
        }
        for (int r = static_cast<int>(std::max<int64_t>(0, rows - g * kPackRows)); r < kPackRows; ++r)
          for (int64_t c = 0; c < nb; ++c) dst[kPackRows * c + r] = 0;  // padding rows
      }
    });
    return v;
  }
  ThreadPool::global().parallel_for(n_groups, [&](int64_t g0, int64_t g1, int) {
    for (int64_t g = g0; g < g1; ++g)
      for (int64_t b = 0; b < nb; ++b)
        for (int r = 0; r < kPackRows; ++r) {
          const int64_t row = g * kPackRows + r;
          pack_block(W.type, row < rows ? W.row(row) + b * bb : nullptr, out + g * gb + b * pbb, r);
        }
  });
  return v;
}

PackedMatrix pack_matrix(const TensorView& W) {
  PackedMatrix p{W, HugePageBuffer(packed_bytes(W))};
  p.view = pack_matrix_into(W, p.storage.data());
  return p;
}

}  // namespace brisk
