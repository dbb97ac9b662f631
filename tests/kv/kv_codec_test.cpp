// KV codecs: round-trip error bounds on fresh random vectors (with outlier channels, as
// real keys have), the rotation's orthogonality, and the cache's byte accounting.
#include "kv/kv_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kv/kv_cache.h"
#include "util/error.h"

namespace brisk {
namespace {

std::vector<float> random_head(std::mt19937& rng, int64_t d) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(d));
  for (auto& v : x) v = g(rng);
  x[3] *= 20.0f;  // an outlier channel
  return x;
}

std::vector<float> round_trip(KvType t, const std::vector<float>& x) {
  const int64_t d = static_cast<int64_t>(x.size());
  std::vector<uint8_t> bytes(static_cast<size_t>(kv_head_bytes(t, d)));
  std::vector<float> y(x.size());
  encode_kv_head(t, x.data(), d, bytes.data());
  decode_kv_head(t, bytes.data(), d, y.data());
  return y;
}

double l2(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - (b.empty() ? 0.0 : b[i])) * (double(a[i]) - (b.empty() ? 0.0 : b[i]));
  return std::sqrt(s);
}

TEST(KvCodec, ScalarCodecsStayWithinHalfAStep) {
  std::mt19937 rng(11);
  for (int64_t d : {32, 64, 128}) {
    for (int trial = 0; trial < 50; ++trial) {
      const std::vector<float> x = random_head(rng, d);
      const std::vector<float> f16 = round_trip(KvType::f16, x), i8 = round_trip(KvType::int8, x),
                               i4 = round_trip(KvType::int4, x);
      for (int64_t g = 0; g < d / kKvGroup; ++g) {
        float amax = 0, lo = INFINITY, hi = -INFINITY;
        for (int64_t i = g * kKvGroup; i < (g + 1) * kKvGroup; ++i)
          amax = std::max(amax, std::fabs(x[i])), lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
        for (int64_t i = g * kKvGroup; i < (g + 1) * kKvGroup; ++i) {
          EXPECT_LE(std::fabs(f16[i] - x[i]), std::fabs(x[i]) * 0.00049f + 1e-7f);
          // half a step, plus the half-precision scale's rounding (2^-11 of each level)
          EXPECT_LE(std::fabs(i8[i] - x[i]), amax / 254.0f * 1.01f + amax * 0.0005f) << i;
          EXPECT_LE(std::fabs(i4[i] - x[i]), (hi - lo) / 30.0f * 1.01f + (std::fabs(lo) + hi - lo) * 0.0006f) << i;
        }
      }
    }
  }
}

TEST(KvCodec, RotationIsOrthogonalAndHelpsInt4WithOutliers) {
  std::mt19937 rng(12);
  double err4 = 0, err4r = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> x = random_head(rng, 64);
    std::vector<float> y = x;
    kv_rotate(y.data(), 64);
    EXPECT_NEAR(l2(y, {}), l2(x, {}), 1e-4 * l2(x, {}));
    kv_unrotate(y.data(), 64);
    EXPECT_LE(l2(y, x), 1e-5 * l2(x, {}));
    err4 += l2(round_trip(KvType::int4, x), x);
    const std::vector<float> r = round_trip(KvType::int4r, x);
    err4r += l2(r, x);
    // rotated domain: each coordinate within half a step of its group's range, so the
    // L2 error is at most sqrt(d) * max step / 2 (+ rounding of the half scales)
    std::vector<float> xr = x;
    kv_rotate(xr.data(), 64);
    float range = 0;
    for (int64_t g = 0; g < 2; ++g) {
      float lo = INFINITY, hi = -INFINITY;
      for (int64_t i = g * 32; i < g * 32 + 32; ++i) lo = std::min(lo, xr[i]), hi = std::max(hi, xr[i]);
      range = std::max(range, hi - lo);
    }
    EXPECT_LE(l2(r, x), std::sqrt(64.0) * range / 30.0 * 1.05 + 1e-3 * l2(x, {}));
  }
  EXPECT_LT(err4r, 0.7 * err4);  // the outlier no longer sets every other channel's step
}

TEST(KvCodec, Nsn2KeepsTheNormAndTheDirection) {
  std::mt19937 rng(13);
  double rel = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const std::vector<float> x = random_head(rng, 64);
    const std::vector<float> y = round_trip(KvType::nsn2, x);
    EXPECT_NEAR(l2(y, {}), l2(x, {}), 1e-4 * l2(x, {}));  // renormalized to the input's norm
    rel += l2(y, x) / l2(x, {});
  }
  rel /= 200;
  // 2 bits per number: a scalar 2-bit quantizer of a Gaussian leaves ~34% relative L2
  // error (Lloyd-Max MSE 0.1175); 8-dimensional vector quantization must do better.
  EXPECT_LT(rel, 0.34);
  EXPECT_GT(rel, 0.05);  // and it is a real 2-bit code, not a copy
}

TEST(KvCodec, BytesPerTokenAndErrors) {
  const int64_t d = 64;
  EXPECT_EQ(kv_head_bytes(KvType::f32, d), 256);
  EXPECT_EQ(kv_head_bytes(KvType::f16, d), 128);
  EXPECT_EQ(kv_head_bytes(KvType::int8, d), 68);
  EXPECT_EQ(kv_head_bytes(KvType::int4, d), 40);
  EXPECT_EQ(kv_head_bytes(KvType::int4r, d), 40);
  EXPECT_EQ(kv_head_bytes(KvType::nsn2, d), 20);
  EXPECT_THROW(kv_head_bytes(KvType::int8, 40), Error);   // not a multiple of 32
  EXPECT_THROW(kv_head_bytes(KvType::int4r, 96), Error);  // not a power of two
  EXPECT_THROW(parse_kv_type("int3"), Error);
  KvCacheShape s{2, 1, 10, 2, d};
  s.kv_type = KvType::int4;
  KvCache c(s);
  EXPECT_EQ(c.bytes(), 2u * 2 * 10 * 2 * 40);
  EXPECT_EQ(c.bytes_per_token(), 2 * 2 * 2 * 40);
  EXPECT_THROW(c.k_row(0, 0, 0), Error);  // float rows exist only in f32 caches
}

}  // namespace
}  // namespace brisk
