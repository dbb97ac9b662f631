#include <cmath>

#include "kernels/ops.h"

namespace brisk {

// The sum of squares is kept in double: it is O(n) next to the matmuls, and it makes the
// result independent of summation order to within float rounding.
void rmsnorm(const float* x, const float* w, int64_t n_tokens, int64_t n, float eps, float* out) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * n;
    float* ot = out + t * n;
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xt[i]) * xt[i];
    float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    for (int64_t i = 0; i < n; ++i) ot[i] = xt[i] * scale * w[i];
  }
}

}  // namespace brisk
