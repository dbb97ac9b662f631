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
typedef float v4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));

// exp(x) for x <= 0 to ~2 ulp: x = n ln2 + r with |r| <= ln2/2 (n rounded by the
// conversion of x/ln2 - 0.5, which truncates toward zero for x <= 0), exp(r) by its
// degree-6 Taylor polynomial (next term < 1.3e-7 relative), 2^n put into the exponent bits.
// Below -87 it is clamped to exp(-87) ~ 1.6e-38: silu(x) there is x * 1.6e-38 instead of
// a denormal or -0, a difference of below 1e-36.
inline v4 exp_nonpos(v4 x) {
  x = x < -87.0f ? v4{} - 87.0f : x;
  const vi4 n = __builtin_convertvector(x * 1.44269504088896341f - 0.5f, vi4);
  const v4 nf = __builtin_convertvector(n, v4);
  const v4 r = (x - nf * 0.693145751953125f) - nf * 1.428606765330187045e-06f;  // ln2 hi + lo
  v4 p = v4{} + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const vi4 bits = (n + 127) << 23;
  v4 two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

// silu(g) * u = g * sigmoid(g) * u, sigmoid from e = exp(-|g|) so exp never overflows:
// 1 / (1 + e) for g >= 0, e / (1 + e) below.
inline v4 silu_mul(v4 g, v4 u) {
  const v4 a = g < 0 ? -g : g;
  const v4 e = exp_nonpos(-a);
  const v4 s = (g < 0 ? e : v4{} + 1.0f) / (1.0f + e);
  return g * s * u;
}

void swiglu_range(const float* gate, const float* up, int64_t b, int64_t e, float* out) {
  int64_t i = b;
  for (; i + 4 <= e; i += 4) {
    v4 g, u;
    std::memcpy(&g, gate + i, sizeof g);
    std::memcpy(&u, up + i, sizeof u);
    const v4 o = silu_mul(g, u);
    std::memcpy(out + i, &o, sizeof o);
  }
  if (i < e) {  // the tail through the same lanes, so every element gets the same bits
    v4 g{}, u{};
    std::memcpy(&g, gate + i, (e - i) * sizeof(float));
    std::memcpy(&u, up + i, (e - i) * sizeof(float));
    const v4 o = silu_mul(g, u);
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
