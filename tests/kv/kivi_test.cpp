// kivi4 (KIVI, arXiv 2402.02750): K per channel over groups of kKiviGroup positions stays
// within half a step of each channel's range; the newest positions stay exact until their
// group is complete; a rollback re-quantizes the group it reopens; what the cache refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kv/kv_cache.h"
#include "kv/kv_codec.h"
#include "tensor/quant.h"
#include "util/error.h"

namespace brisk {
namespace {

// n rows of d numbers, N(0, 1) but for outlier channels as KIVI describes real keys': large
// in the same channels at every token (3: about +20, 5: about -7, with more spread).
std::vector<float> random_rows(std::mt19937& rng, int64_t n, int64_t d) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * d));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < d; ++c)
      x[r * d + c] = c == 3 ? 20.0f + 3.0f * g(rng) : c == 5 ? -7.0f + 2.0f * g(rng) : g(rng);
  return x;
}

TEST(Kivi, KGroupsStayWithinHalfAStepPerChannel) {
  std::mt19937 rng(11);
  for (int64_t d : {32, 64, 128}) {
    for (int trial = 0; trial < 20; ++trial) {
      const std::vector<float> x = random_rows(rng, kKiviGroup, d);
      std::vector<uint8_t> group(static_cast<size_t>(kivi_k_group_bytes(d)));
      encode_kivi_k(x.data(), d, d, group.data());
      std::vector<float> y(static_cast<size_t>(d));
      double err_kivi = 0, err_int4 = 0;
      for (int64_t r = 0; r < kKiviGroup; ++r) {
        decode_kivi_k(group.data(), r, d, y.data());
        for (int64_t c = 0; c < d; ++c) {
          float lo = x[c], hi = x[c];
          for (int64_t k = 0; k < kKiviGroup; ++k)
            lo = std::fmin(lo, x[k * d + c]), hi = std::fmax(hi, x[k * d + c]);
          const float step = fp16_to_fp32(fp32_to_fp16((hi - lo) / 15.0f));
          // half a step, plus the half-precision rounding of min and scale (x 15 steps)
          const float bound = 0.5f * step + 1e-3f * (std::fabs(lo) + 15.0f * step);
          EXPECT_LE(std::fabs(y[c] - x[r * d + c]), bound) << "d " << d << " row " << r << " ch " << c;
          err_kivi += (y[c] - x[r * d + c]) * (y[c] - x[r * d + c]);
        }
        // the same row as per-token int4 (what int4 does with K)
        std::vector<uint8_t> b(static_cast<size_t>(kv_head_bytes(KvType::int4, d)));
        std::vector<float> z(static_cast<size_t>(d));
        encode_kv_head(KvType::int4, x.data() + r * d, d, b.data());
        decode_kv_head(KvType::int4, b.data(), d, z.data());
        for (int64_t c = 0; c < d; ++c) err_int4 += (z[c] - x[r * d + c]) * (z[c] - x[r * d + c]);
      }
      // Channel outliers are what per-channel quantization is for.
      EXPECT_LT(err_kivi, 0.5 * err_int4) << "d " << d;
    }
  }
}

TEST(Kivi, CacheKeepsTheIncompleteGroupExactAndReopensGroupsOnRollback) {
  const int64_t d = 64, heads = 2, n = 100;
  KvCacheShape s{2, 1, 128, heads, d};
  s.kv_type = KvType::kivi4;
  KvCache c(s);
  EXPECT_EQ(c.row_bytes(0), heads * kv_head_bytes(KvType::int4, d));
  std::mt19937 rng(4);
  std::vector<float> k = random_rows(rng, n, heads * d), v = random_rows(rng, n, heads * d);
  for (int64_t p = 0; p < n; ++p)
    for (int64_t l = 0; l < 2; ++l) c.store(l, 0, p, &k[p * heads * d], &v[p * heads * d]);
  c.set_length(0, n);
  EXPECT_EQ(c.view(1, 0).k_quantized, 96);
  std::vector<float> y(d), want(d);
  std::vector<uint8_t> group(static_cast<size_t>(kivi_k_group_bytes(d)));
  std::vector<float> rows(static_cast<size_t>(kKiviGroup * d));
  for (int64_t p = 0; p < n; ++p)
    for (int64_t g = 0; g < heads; ++g) {
      c.decode_k(1, 0, p, g, y.data());
      if (p >= 96) {  // the incomplete group: exact
        for (int64_t e = 0; e < d; ++e) EXPECT_EQ(y[e], k[(p * heads + g) * d + e]);
        continue;
      }
      const int64_t first = p - p % kKiviGroup;  // the group, quantized on its own
      for (int64_t r = 0; r < kKiviGroup; ++r)
        std::copy_n(&k[((first + r) * heads + g) * d], d, &rows[r * d]);
      encode_kivi_k(rows.data(), d, d, group.data());
      decode_kivi_k(group.data(), p % kKiviGroup, d, want.data());
      for (int64_t e = 0; e < d; ++e) EXPECT_EQ(y[e], want[e]) << p;
    }

  // Roll back to 40 and write new rows 40..79: group 1 (32..63) is re-quantized from the
  // decoded rows 32..39 and the new rows 40..63.
  c.truncate(0, 40);
  std::vector<float> k2 = random_rows(rng, n, heads * d);
  std::vector<float> before(static_cast<size_t>(8 * d));
  for (int64_t p = 32; p < 40; ++p) c.decode_k(0, 0, p, 0, &before[(p - 32) * d]);
  for (int64_t p = 40; p < 80; ++p)
    for (int64_t l = 0; l < 2; ++l) c.store(l, 0, p, &k2[p * heads * d], &v[p * heads * d]);
  c.set_length(0, 80);
  EXPECT_EQ(c.view(0, 0).k_quantized, 64);
  for (int64_t r = 0; r < kKiviGroup; ++r)
    std::copy_n(r < 8 ? &before[r * d] : &k2[((32 + r) * heads) * d], d, &rows[r * d]);
  encode_kivi_k(rows.data(), d, d, group.data());
  for (int64_t p = 32; p < 80; ++p) {
    c.decode_k(0, 0, p, 0, y.data());
    if (p < 64) decode_kivi_k(group.data(), p - 32, d, want.data());
    else std::copy_n(&k2[p * heads * d], d, want.data());
    for (int64_t e = 0; e < d; ++e) EXPECT_EQ(y[e], want[e]) << p;
  }

  // A speculative rollback into the group closed last (to 50, then the same rows again):
  // its rows are still exact in the residual, so the group comes back bit for bit.
  c.truncate(0, 50);
  for (int64_t p = 50; p < 64; ++p)
    for (int64_t l = 0; l < 2; ++l) c.store(l, 0, p, &k2[p * heads * d], &v[p * heads * d]);
  EXPECT_EQ(c.view(0, 0).k_quantized, 64);
  for (int64_t p = 32; p < 64; ++p) {
    c.decode_k(0, 0, p, 0, y.data());
    decode_kivi_k(group.data(), p - 32, d, want.data());
    for (int64_t e = 0; e < d; ++e) EXPECT_EQ(y[e], want[e]) << p;
  }
}

TEST(Kivi, RefusesWhatWouldSplitItsGroups) {
  KvCacheShape s{1, 1, 64, 1, 32};
  s.kv_type = KvType::kivi4;
  s.kv_evict = "snapkv:0.5";
  EXPECT_THROW(KvCache{s}, Error);
  s.kv_evict = "none";
  s.block_size = 16, s.n_blocks = 8;
  EXPECT_THROW(KvCache{s}, Error);  // the serving engine's paged cache, blocks of 16
  s.block_size = 32;
  EXPECT_NO_THROW(KvCache{s});
  s.n_blocks = 0, s.block_size = 16;
  EXPECT_THROW(KvCache{s}, Error);  // blocks of 16 < a group
  s.block_size = 32;
  EXPECT_NO_THROW(KvCache{s});
  s.head_dim = 48;
  EXPECT_THROW(KvCache{s}, Error);
}

}  // namespace
}  // namespace brisk
