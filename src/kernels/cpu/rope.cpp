#include <cmath>

#include "kernels/ops.h"
#include "util/thread_pool.h"

namespace brisk {

void rope_angles(const int32_t* pos, int64_t n_tokens, const float* inv_freq, int64_t half, float* cs) {
  auto tokens = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t i = 0; i < half; ++i) {
        const double theta = static_cast<double>(pos[t]) * inv_freq[i];
        cs[2 * (t * half + i)] = static_cast<float>(std::cos(theta));
        cs[2 * (t * half + i) + 1] = static_cast<float>(std::sin(theta));
      }
  };
  if (n_tokens < 16) return tokens(0, n_tokens, 0);
  ThreadPool::global().parallel_for(n_tokens, tokens);
}

void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const float* cs, bool neox) {
  const int64_t half = head_dim / 2;
  auto tokens = [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* ct = cs + 2 * t * half;
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + (t * n_heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          // GGUF llama pairs adjacent values; NeoX/HF pairs i with i + head_dim/2.
          const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
          const float c = ct[2 * i], s = ct[2 * i + 1], x0 = v[a], x1 = v[b];
          v[a] = x0 * c - x1 * s;
          v[b] = x0 * s + x1 * c;
        }
      }
    }
  };
  // Only long prefills are worth the threads: a rotation is 6 flops a pair (a token's result
  // never depends on the split).
  if (n_tokens * n_heads * head_dim < (1 << 16)) return tokens(0, n_tokens, 0);
  ThreadPool::global().parallel_for(n_tokens, tokens);
}

}  // namespace brisk
