#include "kernels/cpu/matmul_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/dispatch.h"

#include "tensor/quant.h"

namespace brisk {

void matmul_ref(const TensorView& W, const float* x, int64_t n_tokens, float* y) {
  const int64_t k = W.ne[0], rows = W.rows();
  std::vector<float> w(static_cast<size_t>(k));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(W.type, W.row(r), w.data(), k);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * k;
      double s = 0;
      for (int64_t i = 0; i < k; ++i) s += static_cast<double>(w[i]) * xt[i];
      y[t * rows + r] = static_cast<float>(s);
    }
  }
}

void quantize_act_ref(const float* x, int64_t k, int8_t* qs, float* d) {
  for (int64_t b = 0; b < k / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    d[b] = amax / 127.0f;
    const float id = d[b] != 0 ? 1.0f / d[b] : 0.0f;
    for (int i = 0; i < 32; ++i) qs[32 * b + i] = static_cast<int8_t>(std::nearbyint(x[32 * b + i] * id));
  }
}

void matmul_q8_ref(const TensorView& W, const float* x, int64_t n_tokens, float* y) {
  const int64_t k = W.ne[0], rows = W.rows(), nb = k / 32;
  std::vector<int8_t> q(static_cast<size_t>(k));
  std::vector<float> d(static_cast<size_t>(nb)), w(static_cast<size_t>(k));
  for (int64_t t = 0; t < n_tokens; ++t) {
    quantize_act_ref(x + t * k, k, q.data(), d.data());
    for (int64_t r = 0; r < rows; ++r) {
      // The weight's own block scale times integers: dequantized values divided by the
      // block scale are the (offset) integers exactly.
      dequantize_row(W.type, W.row(r), w.data(), k);
      double s = 0;
      for (int64_t b = 0; b < nb; ++b) {
        double blk = 0;
        for (int i = 0; i < 32; ++i) blk += static_cast<double>(w[32 * b + i]) * q[32 * b + i];
        s += blk * d[b];
      }
      y[t * rows + r] = static_cast<float>(s);
    }
  }
}

}  // namespace brisk
