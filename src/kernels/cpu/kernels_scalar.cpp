// Portable kernels: reference dequantizers and a dot-product tile that mirrors the
// 16-lane accumulation of the vector paths in plain C++.
#include <algorithm>
#include <cmath>

#include "kernels/dispatch.h"
#include "tensor/block_layouts.h"
#include "tensor/quant.h"

namespace brisk {

namespace {

template <DType T>
void dequant(const void* src, float* dst, int64_t n) {
  dequantize_row(T, src, dst, n);
}

void dot_tile_scalar(const float* w, int64_t ldw, int64_t n_rows, const float* x, int64_t ldx,
                     int64_t n_tok, int64_t k, float* y, int64_t ldy) {
  for (int64_t t = 0; t < n_tok; ++t) {
    const float* xt = x + t * ldx;
    for (int64_t r = 0; r < n_rows; ++r) {
      const float* wr = w + r * ldw;
      float acc[8] = {};
      int64_t i = 0;
      for (; i + 8 <= k; i += 8)
        for (int l = 0; l < 8; ++l) acc[l] += wr[i + l] * xt[i + l];
      for (; i < k; ++i) acc[i & 7] += wr[i] * xt[i];
      y[t * ldy + r] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
  }
}

// The definition of activation quantization; the vector ISAs reproduce it bit for bit.
void quantize_act_scalar(const float* x, int64_t k, int8_t* qs, float* d) {
  for (int64_t b = 0; b < k / 32; ++b, x += 32, qs += 32) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float db = amax / 127.0f, id = db != 0 ? 1.0f / db : 0.0f;
    d[b] = db;
    for (int i = 0; i < 32; ++i) qs[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
  }
}

// Integer sum of one weight block with one activation block.
inline int32_t block_dot(const BlockQ8_0& w, const int8_t* x) {
  int32_t s = 0;
  for (int i = 0; i < 32; ++i) s += w.qs[i] * x[i];
  return s;
}
inline int32_t block_dot(const BlockQ4_0& w, const int8_t* x) {
  int32_t s = 0;
  for (int i = 0; i < 16; ++i) s += ((w.qs[i] & 0x0F) - 8) * x[i] + ((w.qs[i] >> 4) - 8) * x[i + 16];
  return s;
}

// acc += (d_w * d_x) * isum, block after block.
template <class Block>
void qdot_scalar(const uint8_t* w, size_t row_bytes, int64_t n_rows, const int8_t* xq,
                 const float* xd, int64_t n_tok, int64_t k, float* y, int64_t ldy) {
  const int64_t nb = k / 32;
  for (int64_t t = 0; t < n_tok; ++t) {
    const int8_t* xt = xq + t * k;
    const float* dt = xd + t * nb;
    for (int64_t r = 0; r < n_rows; ++r) {
      const auto* row = reinterpret_cast<const Block*>(w + r * row_bytes);
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b)
        acc += (fp16_to_fp32(row[b].d) * dt[b]) * static_cast<float>(block_dot(row[b], xt + 32 * b));
      y[t * ldy + r] = acc;
    }
  }
}

}  // namespace

void fill_scalar_kernels(KernelTable& t) {
  t.dequant[static_cast<int>(DType::F32)] = dequant<DType::F32>;
  t.dequant[static_cast<int>(DType::F16)] = dequant<DType::F16>;
  t.dequant[static_cast<int>(DType::BF16)] = dequant<DType::BF16>;
  t.dequant[static_cast<int>(DType::Q8_0)] = dequant<DType::Q8_0>;
  t.dequant[static_cast<int>(DType::Q4_0)] = dequant<DType::Q4_0>;
  t.dequant[static_cast<int>(DType::Q4_K)] = dequant<DType::Q4_K>;
  t.dequant[static_cast<int>(DType::Q6_K)] = dequant<DType::Q6_K>;
  t.dot_tile = dot_tile_scalar;
  t.quantize_act = quantize_act_scalar;
  t.qdot[static_cast<int>(DType::Q8_0)] = qdot_scalar<BlockQ8_0>;
  t.qdot[static_cast<int>(DType::Q4_0)] = qdot_scalar<BlockQ4_0>;
}

}  // namespace brisk
