#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "util/thread_pool.h"

namespace brisk {

void rope(float* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, const int32_t* pos,
          const float* inv_freq, bool neox) {
  const int64_t half = head_dim / 2;
  auto tokens = [&](int64_t t0, int64_t t1, int) {
    std::vector<float> cs(static_cast<size_t>(2 * half));
    for (int64_t t = t0; t < t1; ++t) {
      // The angles depend only on the token, so compute them once for all heads.
      for (int64_t i = 0; i < half; ++i) {
        double theta = static_cast<double>(pos[t]) * inv_freq[i];
        cs[2 * i] = static_cast<float>(std::cos(theta));
        cs[2 * i + 1] = static_cast<float>(std::sin(theta));
      }
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + (t * n_heads + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          // GGUF llama pairs adjacent values; NeoX/HF pairs i with i + head_dim/2.
          int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
          float c = cs[2 * i], s = cs[2 * i + 1], x0 = v[a], x1 = v[b];
          v[a] = x0 * c - x1 * s;
          v[b] = x0 * s + x1 * c;
        }
      }
    }
  };
  // Prefill and batched decode share the tokens out (a token's result never depends on it).
  if (n_tokens < 16) return tokens(0, n_tokens, 0);
  ThreadPool::global().parallel_for(n_tokens, tokens);
}

}  // namespace brisk
