#include "kernels/cpu/matmul_ref.h"

#include <vector>

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

}  // namespace brisk
