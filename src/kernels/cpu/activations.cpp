#include <algorithm>
#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "util/thread_pool.h"

namespace brisk {

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float m = x[0];
  for (int64_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);  // subtracting the max keeps exp from overflowing
    sum += x[i];
  }
  float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  // Prefill and batched decode: T x n_ff values, worth the threads in pieces of 4,096
  // (an element's result never depends on which piece or lane it falls in).
  const SwigluFn fn = kernel_table().swiglu;
  constexpr int64_t kPiece = 4096;
  if (n <= 2 * kPiece) return fn(gate, up, n, out);
  ThreadPool::global().parallel_for((n + kPiece - 1) / kPiece, [&](int64_t b, int64_t e, int) {
    fn(gate + b * kPiece, up + b * kPiece, std::min(n, e * kPiece) - b * kPiece, out + b * kPiece);
  });
}

}  // namespace brisk
