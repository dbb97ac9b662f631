#include <algorithm>
#include <cmath>
#include <cstring>

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

namespace {

// Four lanes in GCC's vector extension, the baseline's SSE registers: the lanes are what
// makes silu vectorize at all (libm's expf does not).
typedef float vlane __attribute__((vector_size(16)));
#include "exp_nonpos.inc"

// silu(g) * u = g * sigmoid(g) * u, sigmoid from e = exp(-|g|) so exp never overflows:
// 1 / (1 + e) for g >= 0, e / (1 + e) below (below g = -87, exp's clamp makes silu g * 1.6e-38).
inline vlane silu_mul(vlane g, vlane u) {
  const vlane a = g < 0 ? -g : g;
  const vlane e = exp_nonpos(-a);
  const vlane s = (g < 0 ? e : vlane{} + 1.0f) / (1.0f + e);
  return g * s * u;
}

void swiglu_range(const float* gate, const float* up, int64_t b, int64_t e, float* out) {
  int64_t i = b;
  for (; i + 4 <= e; i += 4) {
    vlane g, u;
    std::memcpy(&g, gate + i, sizeof g);
    std::memcpy(&u, up + i, sizeof u);
    const vlane o = silu_mul(g, u);
    std::memcpy(out + i, &o, sizeof o);
  }
  if (i < e) {  // the tail through the same lanes, so every element gets the same bits
    vlane g{}, u{};
    std::memcpy(&g, gate + i, (e - i) * sizeof(float));
    std::memcpy(&u, up + i, (e - i) * sizeof(float));
    const vlane o = silu_mul(g, u);
    std::memcpy(out + i, &o, (e - i) * sizeof(float));
  }
}

}  // namespace

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  // Prefill and batched decode: T x n_ff values, worth the threads; in pieces of 2,048 (a
  // multiple of 4, so the split never changes which values share lanes).
  constexpr int64_t kPiece = 2048;
  if (n <= 2 * kPiece) return swiglu_range(gate, up, 0, n, out);
  ThreadPool::global().parallel_for((n + kPiece - 1) / kPiece, [&](int64_t b, int64_t e, int) {
    swiglu_range(gate, up, b * kPiece, std::min(n, e * kPiece), out);
  });
}

}  // namespace brisk
