// Portable kernels: reference dequantizers and a dot-product tile that mirrors the
// 16-lane accumulation of the vector paths in plain C++.
#include "kernels/dispatch.h"
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
}

}  // namespace brisk
