#include "tensor/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "tensor/block_layouts.h"
#include "util/error.h"

namespace brisk {
namespace {

uint32_t fbits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(Fp16, EdgeCases) {
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);            // largest half
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7BFF);           // below the halfway point
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);            // tie rounds to even = inf
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);             // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);             // tie to even (0)
  EXPECT_EQ(fp32_to_fp16(0x1.8p-25f), 0x0001);           // above the tie
  EXPECT_EQ(fp32_to_fp16(0x3p-25f), 0x0002);             // 1.5 ulp tie -> even 2
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);             // smallest normal
  EXPECT_EQ(fp32_to_fp16(0x1.ff8p-15f), 0x03FF);         // largest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1.ffcp-15f), 0x0400);         // tie above it rounds into normal
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3C00);      // tie -> even
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x3p-11f), 0x3C02);      // tie -> even (up)
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1.2p-11f), 0x3C01);    // above tie
  EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
  uint16_t nan = fp32_to_fp16(NAN);
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));
  EXPECT_EQ(fp16_to_fp32(0x7C00), INFINITY);
  EXPECT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x03FF), 0x3FFp-24f);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0x1.554p-2f);
  EXPECT_EQ(fbits(fp16_to_fp32(0x8000)), 0x80000000u);
}

TEST(Fp16, AllHalvesRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f))));
      continue;
    }
    ASSERT_EQ(fp32_to_fp16(f), h) << h;
  }
}

TEST(Fp16, MatchesNearestOnRandomFloats) {
  // Compare against a brute check: the result is the nearest half, ties to even mantissa.
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> e(-26, 16);
  for (int i = 0; i < 20000; ++i) {
    float f = std::ldexp(1.0f + (rng() % 1000000) / 1e6f, static_cast<int>(e(rng)));
    if (rng() & 1) f = -f;
    uint16_t h = fp32_to_fp16(f);
    if ((h & 0x7FFF) == 0x7C00) {  // overflow: only from the halfway point 65520 up
      ASSERT_GE(std::fabs(f), 65520.0f);
      continue;
    }
    double v = fp16_to_fp32(h);
    for (int d : {-1, 1}) {
      uint16_t n = static_cast<uint16_t>(h + d);
      if ((n & 0x7FFF) >= 0x7C00 || ((h & 0x7FFF) == 0 && d < 0)) continue;
      double w = fp16_to_fp32(n);
      double dv = std::fabs(v - f), dw = std::fabs(w - f);
      ASSERT_TRUE(dv < dw || (dv == dw && (h & 1) == 0)) << f;
    }
  }
}

TEST(Bf16, Conversions) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1p-8f), 0x3F80);       // tie -> even
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x3p-8f), 0x3F82);       // tie -> even (up)
  EXPECT_EQ(fp32_to_bf16(1.0f + 0x1.2p-8f), 0x3F81);
  EXPECT_EQ(fp32_to_bf16(INFINITY), 0x7F80);
  EXPECT_EQ(fp32_to_bf16(3.4e38f), 0x7F80);               // rounds past max to inf
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(NAN))));
  EXPECT_EQ(bf16_to_fp32(0x4049), 3.140625f);
  EXPECT_EQ(bf16_to_fp32(0x0001), 0x1p-133f);              // subnormals kept
}

TEST(Dequant, HandBuiltQ8_0) {
  BlockQ8_0 b[2];
  b[0].d = 0x3800;  // 0.5
  b[1].d = 0xC000;  // -2
  for (int j = 0; j < 32; ++j) b[0].qs[j] = static_cast<int8_t>(j - 16), b[1].qs[j] = static_cast<int8_t>(j == 0 ? -128 : 127 - j);
  float y[64];
  dequantize_row(DType::Q8_0, b, y, 64);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j - 16) * 0.5f);
  EXPECT_EQ(y[32], 256.0f);
  EXPECT_EQ(y[33], -252.0f);
  EXPECT_EQ(y[63], -192.0f);
}

TEST(Dequant, HandBuiltQ4_0) {
  BlockQ4_0 b;
  b.d = 0x4000;  // 2.0
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(DType::Q4_0, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 2.0f) << j;          // low nibbles: elements 0..15
    EXPECT_EQ(y[j + 16], (7 - j) * 2.0f) << j;     // high nibbles: elements 16..31
  }
}

TEST(Dequant, HandBuiltQ4_K) {
  const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
  const int mn[8] = {0, 5, 10, 63, 16, 20, 47, 1};
  BlockQ4_K b{};
  b.d = 0x3C00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  // Pack by the documented rule: bytes 0..3 = sc0..3 | (top 2 bits of sc4..7) << 6,
  // bytes 4..7 = m0..3 | (top bits of m4..7) << 6, bytes 8..11 = low4(sc4..7) | low4(m4..7) << 4.
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    b.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
  }
  // Literal check of the packing for sub-block 6 (sc 50 = 0b110010, m 47 = 0b101111).
  EXPECT_EQ(b.scales[2], 3 | (3 << 6));
  EXPECT_EQ(b.scales[10], 2 | (15 << 4));
  EXPECT_EQ(b.scales[6], 10 | (2 << 6));
  std::mt19937 rng(std::random_device{}());
  for (auto& q : b.qs) q = static_cast<uint8_t>(rng());
  b.qs[0] = 0x5A;   // element 0 = 10 (sub 0), element 32 = 5 (sub 1)
  b.qs[96] = 0xF3;  // element 192 = 3 (sub 6), element 224 = 15 (sub 7)
  float y[256];
  dequantize_row(DType::Q4_K, &b, y, 256);
  EXPECT_EQ(y[0], 1.0f * 1 * 10 - 0.5f * 0);
  EXPECT_EQ(y[32], 1.0f * 2 * 5 - 0.5f * 5);
  EXPECT_EQ(y[192], 1.0f * 50 * 3 - 0.5f * 47);
  EXPECT_EQ(y[224], 1.0f * 63 * 15 - 0.5f * 1);
  for (int e = 0; e < 256; ++e) {
    int j = e / 32, g = e / 64, pos = e % 64;
    uint8_t byte = b.qs[32 * g + pos % 32];
    int q = pos < 32 ? (byte & 15) : (byte >> 4);
    EXPECT_EQ(y[e], 1.0f * sc[j] * q - 0.5f * mn[j]) << e;
  }
}

TEST(Dequant, HandBuiltQ6_K) {
  BlockQ6_K b{};
  b.d = 0x3400;  // 0.25
  const int8_t sc[16] = {1, -1, 2, -3, 5, 8, -13, 21, 127, -128, 0, 7, -7, 64, 3, 100};
  std::memcpy(b.scales, sc, 16);
  std::mt19937 rng(std::random_device{}());
  for (auto& q : b.ql) q = static_cast<uint8_t>(rng());
  for (auto& q : b.qh) q = static_cast<uint8_t>(rng());
  // Element 0: ql[0] low nibble, qh[0] bits 0-1. Element 96: ql[32] high, qh[0] bits 6-7.
  b.ql[0] = 0x3F;   // element 0 low = 15, element 64 low = 3
  b.ql[32] = 0x91;  // element 32 low = 1, element 96 low = 9
  b.qh[0] = 0b10'01'11'00;  // element 0: 0, 32: 3, 64: 1, 96: 2
  float y[256];
  dequantize_row(DType::Q6_K, &b, y, 256);
  EXPECT_EQ(y[0], 0.25f * 1 * (15 - 32));
  EXPECT_EQ(y[32], 0.25f * 2 * ((1 | 3 << 4) - 32));
  EXPECT_EQ(y[64], 0.25f * 5 * ((3 | 1 << 4) - 32));
  EXPECT_EQ(y[96], 0.25f * -13 * ((9 | 2 << 4) - 32));
  for (int e = 0; e < 256; ++e) {
    int h = e / 128, p = e % 128, l = p % 32, k = p / 32;
    uint8_t byte = b.ql[64 * h + l + (k & 1) * 32];
    int lo = k < 2 ? (byte & 15) : (byte >> 4);
    int hi = (b.qh[32 * h + l] >> (2 * k)) & 3;
    float want = 0.25f * sc[8 * h + l / 16 + 2 * k] * ((lo | hi << 4) - 32);
    EXPECT_EQ(y[e], want) << e;
  }
}

struct RoundTrip {
  DType type;
  double max_rel_rmse;  // RMS error / RMS of the data, Gaussian inputs
};

TEST(Quant, RoundTripErrorBounds) {
  // Measured on 65536 Gaussian values: q8_0 0.0054, q6_k 0.0178, q4_k 0.0715, q4_0 0.0827,
  // bf16 0.0017, f16 0.0002. Bounds leave a margin above those.
  const RoundTrip cases[] = {{DType::F32, 0.0},      {DType::F16, 0.0005}, {DType::BF16, 0.003},
                             {DType::Q8_0, 0.008},   {DType::Q6_K, 0.024}, {DType::Q4_K, 0.09},
                             {DType::Q4_0, 0.105}};
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> nd(0, 1);
  for (const RoundTrip& c : cases) {
    for (int64_t n : {int64_t(256), int64_t(768), int64_t(4096)}) {
      std::vector<float> x(n), y(n);
      // Magnitudes from 1e-3 to 1e2: real weights (rms ~0.02) make K-quant super-scales
      // fp16-subnormal, so those must stay accurate too.
      float scale = std::pow(10.0f, std::uniform_real_distribution<float>(-3, 2)(rng));
      for (auto& v : x) v = nd(rng) * scale;
      std::vector<uint8_t> q(row_bytes(c.type, n));
      quantize_row(c.type, x.data(), q.data(), n);
      dequantize_row(c.type, q.data(), y.data(), n);
      double se = 0, sx = 0;
      for (int64_t i = 0; i < n; ++i) se += (x[i] - y[i]) * (x[i] - y[i]), sx += x[i] * x[i];
      double rel = std::sqrt(se / sx);
      EXPECT_LE(rel, c.max_rel_rmse) << dtype_name(c.type) << " n=" << n;
      if (c.type == DType::Q8_0) {
        // Per element: half a step of the ideal scale d = amax/127, plus up to 127 times the
        // fp16 rounding error of the stored scale d' (which is large for subnormal d').
        for (int64_t b = 0; b < n / 32; ++b) {
          float amax = 0;
          for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
          float d = amax / 127;
          float ds = fp16_to_fp32(reinterpret_cast<const BlockQ8_0*>(q.data())[b].d);
          float bound = 0.5f * d + 127.0f * std::fabs(d - ds);
          for (int j = 0; j < 32; ++j)
            ASSERT_LE(std::fabs(x[b * 32 + j] - y[b * 32 + j]), bound * 1.001f + 1e-30f);
        }
      }
    }
  }
}

TEST(Quant, OddSizesAndSpecialBlocks) {
  // Plain types take any length; zero and constant blocks survive quantization.
  std::vector<float> x = {1.5f, -2.25f, 3.0f}, y(3);
  uint16_t h[3];
  quantize_row(DType::F16, x.data(), h, 3);
  dequantize_row(DType::F16, h, y.data(), 3);
  EXPECT_EQ(y, x);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    for (float c : {0.0f, 1.0f, -3.0f}) {
      std::vector<float> v(256, c), out(256);
      std::vector<uint8_t> q(row_bytes(t, 256));
      quantize_row(t, v.data(), q.data(), 256);
      dequantize_row(t, q.data(), out.data(), 256);
      for (float o : out) ASSERT_NEAR(o, c, std::fabs(c) * 0.01f + 1e-6f) << dtype_name(t) << c;
    }
  }
  float buf[64];
  EXPECT_THROW(dequantize_row(DType::Q8_0, buf, buf, 33), Error);
  EXPECT_THROW(dequantize_row(DType::Q4_K, buf, buf, 32), Error);
  EXPECT_THROW(dequantize_row(DType::Q5_K, buf, buf, 256), Error);
}

}  // namespace
}  // namespace brisk
