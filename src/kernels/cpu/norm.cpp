#include <cmath>

#include "kernels/ops.h"
#include "util/thread_pool.h"

namespace brisk {

namespace {
// Eight independent double sums (lane j takes the elements i = j mod 8), added by halves
// at the end: one serial chain of n adds would wait on the add latency at every element.
// GCC's vector extension spells the same operations on every ISA, so the bits never depend
// on the instruction set.
typedef double vd8 __attribute__((vector_size(64)));

double sum_of_squares(const float* x, int64_t n) {
  vd8 acc = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    vd8 v;
    for (int j = 0; j < 8; ++j) v[j] = static_cast<double>(x[i + j]);
    acc += v * v;
  }
  double s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}
}  // namespace

// The sum of squares is kept in double: it is O(n) next to the matmuls, and it makes the
// result independent of summation order to within float rounding. Many tokens (prefill,
// batched decode) are shared out over the threads; a row's result never depends on it.
void rmsnorm(const float* x, const float* w, int64_t n_tokens, int64_t n, float eps, float* out) {
  auto rows = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xt = x + t * n;
      float* ot = out + t * n;
      const double ss = sum_of_squares(xt, n);
      const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
      for (int64_t i = 0; i < n; ++i) ot[i] = xt[i] * scale * w[i];
    }
  };
  if (n_tokens * n < (1 << 15)) return rows(0, n_tokens, 0);
  ThreadPool::global().parallel_for(n_tokens, rows);
}

}  // namespace brisk
