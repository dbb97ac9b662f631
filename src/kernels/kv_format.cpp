#include "kernels/kv_format.h"

#include <cmath>
#include <mutex>
#include <random>
#include <vector>

#include "util/error.h"

namespace brisk {

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::f32: return "f32";
    case KvType::f16: return "f16";
    case KvType::int8: return "int8";
    case KvType::int4: return "int4";
    case KvType::int4r: return "int4r";
    case KvType::nsn2: return "nsn2";
    case KvType::kivi4: return "kivi4";
  }
  return "?";
}

KvType parse_kv_type(const std::string& name) {
  for (KvType t : {KvType::f32, KvType::f16, KvType::int8, KvType::int4, KvType::int4r,
                   KvType::nsn2, KvType::kivi4})
    if (name == kv_type_name(t)) return t;
  fail("unknown KV type '{}' (expected f32, f16, int8, int4, int4r, kivi4 or nsn2)", name);
}

bool kv_rotated(KvType t) { return t == KvType::int4r || t == KvType::nsn2; }

int64_t kv_head_bytes(KvType t, int64_t d) {
  if (d <= 0) fail("KV type {}: head_dim {} must be positive", kv_type_name(t), d);
  const bool pow2 = (d & (d - 1)) == 0;
  if ((t == KvType::int8 || t == KvType::int4 || t == KvType::int4r || t == KvType::kivi4) &&
      d % kKvGroup != 0)
    fail("KV type {} needs head_dim a multiple of {}, the model has {}", kv_type_name(t),
         kKvGroup, d);
  if (t == KvType::kivi4 && d > kKiviMaxDim)
    fail("KV type kivi4 needs head_dim <= {}, the model has {}", kKiviMaxDim, d);
  if (kv_rotated(t) && (!pow2 || d > 4096 || d < kNsnSub))
    fail("KV type {} needs head_dim a power of two in [8, 4096] (Hadamard rotation), the "
         "model has {}", kv_type_name(t), d);
  const int64_t groups = d / kKvGroup;
  switch (t) {
    case KvType::f32: return 4 * d;
    case KvType::f16: return 2 * d;
    case KvType::int8: return 2 * groups + d;
    case KvType::int4:
    case KvType::int4r:
    case KvType::kivi4: return 4 * groups + d / 2;  // kivi4 K: (4 d + 32 d / 2) / 32, the same
    case KvType::nsn2: return 4 + 2 * (d / kNsnSub);
  }
  return 0;
}

namespace {

// D: fixed pseudo-random signs (splitmix64 of the index), the same in every build.
const std::vector<float>& rotation_signs() {
  static const std::vector<float> s = [] {
    std::vector<float> v(4096);
    for (uint64_t i = 0; i < v.size(); ++i) {
      uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      v[i] = ((z ^ (z >> 31)) & 1) ? -1.0f : 1.0f;
    }
    return v;
  }();
  return s;
}

// In-place unnormalized Walsh-Hadamard transform (d a power of two).
void fwht(float* x, int64_t d) {
  for (int64_t h = 1; h < d; h *= 2)
    for (int64_t i = 0; i < d; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

}  // namespace

void kv_rotate(float* x, int64_t d) {
  const float* s = rotation_signs().data();
  for (int64_t i = 0; i < d; ++i) x[i] *= s[i];
  fwht(x, d);
  const float n = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t i = 0; i < d; ++i) x[i] *= n;
}

void kv_unrotate(float* x, int64_t d) {
  fwht(x, d);
  const float* s = rotation_signs().data();
  const float n = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t i = 0; i < d; ++i) x[i] *= s[i] * n;
}

// NSNQuant's codebook is universal because the normalized, rotated coordinates are close
// to N(0, 1) whatever the model; the signs are stored apart, so the codewords only cover
// the positive orthant: k-means (Lloyd) on |z|, z ~ N(0, I_8), from a fixed seed.
const float* nsn2_codebook() {
  static const std::vector<float> cb = [] {
    constexpr int64_t n = 16384, k = kNsnCodes, m = kNsnSub;
    std::mt19937 rng(20250518);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> x(n * m), c(k * m), sum(k * m);
    std::vector<int64_t> count(k);
    for (float& v : x) v = std::fabs(g(rng));
    for (int64_t i = 0; i < k * m; ++i) c[i] = x[i];  // the first k samples
    for (int iter = 0; iter < 12; ++iter) {
      std::fill(sum.begin(), sum.end(), 0.0f);
      std::fill(count.begin(), count.end(), 0);
      for (int64_t i = 0; i < n; ++i) {
        int64_t best = 0;
        float best_d = INFINITY;
        for (int64_t j = 0; j < k; ++j) {
          float dd = 0;
          for (int64_t e = 0; e < m; ++e) {
            const float t = x[i * m + e] - c[j * m + e];
            dd += t * t;
          }
          if (dd < best_d) best_d = dd, best = j;
        }
        ++count[best];
        for (int64_t e = 0; e < m; ++e) sum[best * m + e] += x[i * m + e];
      }
      for (int64_t j = 0; j < k; ++j)
        if (count[j] > 0)
          for (int64_t e = 0; e < m; ++e) c[j * m + e] = sum[j * m + e] / count[j];
    }
    return c;
  }();
  return cb.data();
}

}  // namespace brisk
