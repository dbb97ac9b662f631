#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "test_rng.h"
#include "kernels/ops.h"
#include "tensor/quant.h"
#include "util/thread_pool.h"

namespace brisk {
namespace {

using test::rng;

std::vector<float> randn(int64_t n, float sd = 1) {
  std::normal_distribution<float> nd(0, sd);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng());
  return v;
}

TEST(Ops, RmsNorm) {
  for (int64_t n : {1, 7, 64, 385}) {
    const int64_t nt = 3;
    auto x = randn(nt * n), w = randn(n);
    std::vector<float> y(nt * n);
    rmsnorm(x.data(), w.data(), nt, n, 1e-5f, y.data());
    for (int64_t t = 0; t < nt; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += double(x[t * n + i]) * x[t * n + i];
      double s = 1 / std::sqrt(ss / n + 1e-5);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(y[t * n + i], x[t * n + i] * s * w[i], 1e-5 * std::fabs(x[t * n + i] * s * w[i]) + 1e-6);
    }
  }
  float x1 = 2, w1 = 3, y1;
  rmsnorm(&x1, &w1, 1, 1, 0, &y1);
  EXPECT_FLOAT_EQ(y1, 3);  // 2 / sqrt(4) * 3
}

// Rotates x as a forward pass does: the positions' angles, then the rotation.
void rope_at(float* x, int64_t nt, int64_t nh, int64_t hd, const int32_t* pos, const float* inv, bool neox) {
  std::vector<float> cs(static_cast<size_t>(nt * hd));
  rope_angles(pos, nt, inv, hd / 2, cs.data());
  rope(x, nt, nh, hd, cs.data(), neox);
}

void check_rope(bool neox) {
  const int64_t nt = 5, nh = 3, hd = 10;
  auto x = randn(nt * nh * hd);
  std::vector<float> y = x, inv(hd / 2);
  for (int64_t i = 0; i < hd / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / hd);
  std::vector<int32_t> pos = {0, 1, 7, 100, 4095};
  rope_at(y.data(), nt, nh, hd, pos.data(), inv.data(), neox);
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t i = 0; i < hd / 2; ++i) {
        const float* v = x.data() + (t * nh + h) * hd;
        const float* o = y.data() + (t * nh + h) * hd;
        int64_t a = neox ? i : 2 * i, b = neox ? i + hd / 2 : 2 * i + 1;
        double th = double(pos[t]) * inv[i];
        double ea = v[a] * std::cos(th) - v[b] * std::sin(th);
        double eb = v[a] * std::sin(th) + v[b] * std::cos(th);
        ASSERT_NEAR(o[a], ea, 1e-5) << neox << t << h << i;
        ASSERT_NEAR(o[b], eb, 1e-5) << neox << t << h << i;
      }
  // Position 0 is the identity.
  for (int64_t i = 0; i < nh * hd; ++i) EXPECT_EQ(y[i], x[i]);
}

TEST(Ops, RopeInterleaved) { check_rope(false); }
TEST(Ops, RopeNeox) { check_rope(true); }

TEST(Ops, RopeLayoutsDiffer) {
  // A unit vector on element 1: interleaved rotates it with element 0, NeoX with element 5.
  std::vector<float> a(10, 0), b(10, 0), inv = {1, 0.5f, 0.25f, 0.125f, 0.0625f};
  a[1] = b[1] = 1;
  int32_t p = 1;
  rope_at(a.data(), 1, 1, 10, &p, inv.data(), false);
  rope_at(b.data(), 1, 1, 10, &p, inv.data(), true);
  EXPECT_NEAR(a[0], -std::sin(1.0), 1e-6);
  EXPECT_NEAR(a[1], std::cos(1.0), 1e-6);
  EXPECT_NEAR(b[1], std::cos(0.5), 1e-6);
  EXPECT_NEAR(b[6], std::sin(0.5), 1e-6);
  EXPECT_EQ(b[0], 0);
}

TEST(Ops, Softmax) {
  for (int64_t n : {1, 5, 1000}) {
    auto x = randn(n, 10);
    x[0] = 500;  // would overflow exp without max subtraction
    std::vector<float> y = x;
    softmax(y.data(), n);
    double m = 500, s = 0;
    for (float v : x) s += std::exp(double(v) - m);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(y[i], std::exp(double(x[i]) - m) / s, 1e-6);
      total += y[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
  float two[2] = {0, std::log(3.0f)};
  softmax(two, 2);
  EXPECT_NEAR(two[0], 0.25f, 1e-7);
}

TEST(Ops, Swiglu) {
  auto g = randn(37, 4), u = randn(37);
  std::vector<float> y(37);
  swiglu(g.data(), u.data(), 37, y.data());
  for (int i = 0; i < 37; ++i)
    ASSERT_NEAR(y[i], g[i] / (1 + std::exp(-double(g[i]))) * u[i], 1e-5 * (1 + std::fabs(y[i])));
  float z = 0, one = 1, out;
  swiglu(&z, &one, 1, &out);
  EXPECT_EQ(out, 0);
}

// The vectorized silu (its own exp) against double precision over the whole float range
// that matters, on enough values to take the threaded path with a ragged tail; and the
// same bits whatever the thread count.
TEST(Ops, SwigluLargeMatchesDoubleAndThreads) {
  const int64_t n = 3 * 2048 * 5 + 13;
  auto g = randn(n, 8), u = randn(n);
  g[0] = 0, g[1] = -90, g[2] = 90, g[3] = -1e-20f, g[4] = 88.5f, g[5] = -87.3f;
  std::vector<float> a(n), b(n);
  ThreadPool::set_global_threads(1);
  swiglu(g.data(), u.data(), n, a.data());
  ThreadPool::set_global_threads(3);
  swiglu(g.data(), u.data(), n, b.data());
  ThreadPool::set_global_threads(0);
  ASSERT_EQ(0, std::memcmp(a.data(), b.data(), n * sizeof(float)));
  for (int64_t i = 0; i < n; ++i) {
    const double want = g[i] / (1 + std::exp(-double(g[i]))) * u[i];
    ASSERT_NEAR(a[i], want, 1e-6 * std::fabs(want) + 1e-35) << "g = " << g[i];
  }
}

// Each instruction set's SwiGLU lanes (4, 8 or 16 floats) give every element the same bits.
TEST(Ops, SwigluEveryIsaGivesTheSameBits) {
  const int64_t n = 1000 + 13;  // a ragged tail for every lane width
  auto g = randn(n, 8), u = randn(n);
  g[0] = 0, g[1] = -90, g[2] = 90, g[3] = -1e-20f, g[4] = 88.5f, g[5] = -87.3f;
  std::vector<float> want(n), got(n);
  kernel_table(Isa::scalar).swiglu(g.data(), u.data(), n, want.data());
  for (int i = 1; i <= static_cast<int>(best_isa()); ++i) {
    const Isa isa = static_cast<Isa>(i);
    std::fill(got.begin(), got.end(), -1.0f);
    kernel_table(isa).swiglu(g.data(), u.data(), n, got.data());
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(std::bit_cast<uint32_t>(want[j]), std::bit_cast<uint32_t>(got[j])) << isa_name(isa) << " element " << j << " g " << g[j];
  }
}

// Softmax weights at a temperature (the sampler's): each instruction set's lanes give every
// element the same bits, within 2.5e-7 relative of exp in double precision, on fresh random
// logits at several temperatures and lengths with ragged tails; the maximum itself gives 1,
// and arguments below -87 the clamp (~1.6e-38), never 0 or a NaN.
TEST(Ops, ExpShiftedEveryIsaMatchesDoubleAndTheSameBits) {
  std::normal_distribution<float> nd(0, 4);
  for (int64_t n : {1, 5, 16, 31, 1000, 16384 + 7}) {
    for (float temp : {0.3f, 1.0f, 2.0f}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = nd(rng());
      if (n > 4) x[3] = -1e4f;  // far below the max: the clamp
      const float mx = x[static_cast<size_t>(std::max_element(x.begin(), x.end()) - x.begin())];
      const float scale = 1.0f / temp;
      std::vector<float> want(x.size()), got(x.size());
      kernel_table(Isa::scalar).exp_shifted(x.data(), n, mx, scale, want.data());
      for (int64_t i = 0; i < n; ++i) {
        const float z = (x[i] - mx) * scale;
        if (x[i] == mx) ASSERT_EQ(want[i], 1.0f);
        if (z < -87) {
          ASSERT_GT(want[i], 0.0f);
          ASSERT_LT(want[i], 2e-38f);
          continue;
        }
        const double e = std::exp(double(z));
        ASSERT_NEAR(want[i], e, 2.5e-7 * e) << "z " << z;
      }
      for (int i = 1; i <= static_cast<int>(best_isa()); ++i) {
        const Isa isa = static_cast<Isa>(i);
        std::fill(got.begin(), got.end(), -1.0f);
        kernel_table(isa).exp_shifted(x.data(), n, mx, scale, got.data());
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(std::bit_cast<uint32_t>(want[j]), std::bit_cast<uint32_t>(got[j])) << isa_name(isa) << " element " << j;
      }
    }
  }
}

// Each instruction set's argmax against a plain scan: the first index of the largest value,
// NaN never winning (a NaN at 0 wins by default), with ties, infinities and signed zeros.
TEST(Ops, ArgmaxEveryIsaMatchesAPlainScan) {
  std::uniform_real_distribution<float> ud(-4, 4);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 100, 1000, 16384}) {
    for (int rep = 0; rep < 30; ++rep) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = std::round(ud(rng()) * 4) / 4;  // coarse values: ties happen
      for (int64_t i = 1; i < n; i += 7 + rng()() % 20) x[i] = nan;
      if (rep % 5 == 1) std::fill(x.begin(), x.end(), -inf);
      if (rep % 5 == 2) x[0] = nan;
      if (rep % 5 == 3) for (float& v : x) v = (rng()() % 2) ? 0.0f : -0.0f;
      if (rep % 5 == 4) x[rng()() % n] = inf;
      int64_t want = 0;
      for (int64_t i = 1; i < n; ++i)
        if (x[i] > x[want]) want = i;
      for (int i = 0; i <= static_cast<int>(best_isa()); ++i)
        ASSERT_EQ(kernel_table(static_cast<Isa>(i)).argmax(x.data(), n), want)
            << isa_name(static_cast<Isa>(i)) << " n " << n << " rep " << rep;
    }
  }
}

// Each instruction set's f32 -> f16 row conversion against fp32_to_fp16, bit for bit: random
// bit patterns (every exponent, NaNs with any payload), values around the rounding ties,
// the overflow edge (65504 / 65520) and the subnormal range, at lengths with and without a
// tail.
TEST(Ops, ToF16EveryIsaMatchesTheScalarConversion) {
  std::vector<float> x;
  for (int i = 0; i < 200000; ++i) x.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng()())));
  std::uniform_real_distribution<float> ud(-1, 1);
  for (float scale : {1.0f, 60000.0f, 65519.0f, 1e-5f, 6e-8f, 3e-8f}) {
    for (int i = 0; i < 20000; ++i) x.push_back(ud(rng()) * scale);
  }
  for (uint32_t h = 0; h < 0x7C00; ++h) {  // every finite half, and the ties just above it
    const uint32_t f = std::bit_cast<uint32_t>(fp16_to_fp32(static_cast<uint16_t>(h)));
    for (uint32_t d : {0u, 0xFFFu, 0x1000u, 0x1001u}) x.push_back(std::bit_cast<float>(f + d));
  }
  for (float v : {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::denorm_min()})
    x.push_back(v);
  std::vector<uint16_t> want(x.size()), got(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = fp32_to_fp16(x[i]);
  for (int i = 0; i <= static_cast<int>(best_isa()); ++i) {
    const ToF16Fn f = kernel_table(static_cast<Isa>(i)).to_f16;
    f(x.data(), static_cast<int64_t>(x.size()), got.data());
    for (size_t j = 0; j < x.size(); ++j)
      ASSERT_EQ(got[j], want[j]) << isa_name(static_cast<Isa>(i)) << " x bits 0x" << std::hex
                                 << std::bit_cast<uint32_t>(x[j]);
    for (int64_t n : {1, 7, 15, 17, 33}) {  // tails
      std::vector<uint16_t> part(static_cast<size_t>(n));
      f(x.data() + 5, n, part.data());
      ASSERT_EQ(0, std::memcmp(part.data(), want.data() + 5, static_cast<size_t>(n) * 2)) << isa_name(static_cast<Isa>(i));
    }
  }
}

// rmsnorm and rope over many tokens (the threaded path) give each token the bits of a
// one-token call.
TEST(Ops, RmsNormAndRopeThreadedEqualOneToken) {
  const int64_t nt = 40, n = 1024, nh = 32, hd = 64;  // 40 x 32 x 64 rope values: threaded
  auto x = randn(nt * n), w = randn(n);
  std::vector<float> all(nt * n), one(n);
  rmsnorm(x.data(), w.data(), nt, n, 1e-5f, all.data());
  for (int64_t t = 0; t < nt; ++t) {
    rmsnorm(x.data() + t * n, w.data(), 1, n, 1e-5f, one.data());
    ASSERT_EQ(0, std::memcmp(one.data(), all.data() + t * n, n * sizeof(float))) << t;
  }
  std::vector<float> inv(hd / 2);
  for (int64_t i = 0; i < hd / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / hd);
  std::vector<int32_t> pos(nt);
  for (int64_t t = 0; t < nt; ++t) pos[t] = static_cast<int32_t>(7 * t + 3);
  auto q = randn(nt * nh * hd);
  std::vector<float> r = q;
  rope_at(r.data(), nt, nh, hd, pos.data(), inv.data(), false);
  for (int64_t t = 0; t < nt; ++t) {
    std::vector<float> s(q.begin() + t * nh * hd, q.begin() + (t + 1) * nh * hd);
    rope_at(s.data(), 1, nh, hd, &pos[t], inv.data(), false);
    ASSERT_EQ(0, std::memcmp(s.data(), r.data() + t * nh * hd, nh * hd * sizeof(float))) << t;
  }
}

}  // namespace
}  // namespace brisk
