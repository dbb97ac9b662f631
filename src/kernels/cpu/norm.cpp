#include <cmath>

#include "kernels/ops.h"
#include "util/thread_pool.h"

namespace brisk {

// The sum of squares is kept in double: it is O(n) next to the matmuls, and it makes the
// result independent of summation order to within float rounding. Many tokens (prefill,
// batched decode) are shared out over the threads; a row's result never depends on it.
void rmsnorm(const float* x, const float* w, int64_t n_tokens, int64_t n, float eps, float* out) {
  auto rows = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + t * n;
      float* ot = out + t * n;
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(xt[i]) * xt[i];
      float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
      for (int64_t i = 0; i < n; ++i) ot[i] = xt[i] * scale * w[i];
    }
  };
  if (n_tokens * n < (1 << 15)) return rows(0, n_tokens, 0);
  ThreadPool::global().parallel_for(n_tokens, rows);
}

}  // namespace brisk
