// The tensor-core causal prefill (attention_prefill) against a plain double-precision
// causal attention over the same f16 values: head_dim 64 and 128, 1, 4 and 8 query heads a
// KV head, runs whose length is no multiple of the 64-row tile, starting at position 0 or
// after a cached prefix (p0 > 0, queries at p0.. attend to 0..their own position).
// Cache positions past the run, and the other sequence's slot, hold NaN: reading any of
// them would show. Output columns between rows (ldo > q_dim) are poisoned and must stay so.
// Tolerance: 2e-3 of max |ref| (P is rounded to f16 for the P V product, ~5e-4 relative a
// weight). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "model/cuda/cuda_model.h"
#include "tensor/quant.h"
#include "util/error.h"

#if defined(BRISK_CUDA)
#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_ops.h"
#endif

namespace brisk::test {
namespace {

#if defined(BRISK_CUDA)
using namespace brisk::cuda;

struct PrefillRun {
  int n, p0, seq;
};

TEST(CudaPrefillAttention, MatchesReference) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.f, 1.f);
  const uint16_t kNan = 0x7e00;
  for (int D : {64, 128}) {
    for (int G : {1, 4, 8}) {
      for (PrefillRun run : {PrefillRun{77, 0, 1}, PrefillRun{130, 45, 0}, PrefillRun{9, 300, 1}, PrefillRun{64, 64, 0}}) {
        AttnDims d;
        d.n_head_kv = 2, d.n_head = 2 * G, d.head_dim = D, d.n_ctx = 400;
        const int QD = d.n_head * D, n_seq = 2, Lk = run.p0 + run.n;
        const int64_t ldo = QD + 8;
        const size_t rows = static_cast<size_t>(n_seq) * d.n_head_kv * d.n_ctx;
        std::vector<uint16_t> k16(rows * D, kNan), v16(rows * D, kNan), q16(static_cast<size_t>(run.n) * QD);
        std::vector<float> kf(rows * D), vf(rows * D), qf(q16.size());
        for (int kh = 0; kh < d.n_head_kv; ++kh)
          for (int p = 0; p < Lk; ++p)
            for (int i = 0; i < D; ++i) {
              const size_t e = ((static_cast<size_t>(run.seq) * d.n_head_kv + kh) * d.n_ctx + p) * D + i;
              k16[e] = fp32_to_fp16(g(rng)), v16[e] = fp32_to_fp16(g(rng));
              kf[e] = fp16_to_fp32(k16[e]), vf[e] = fp16_to_fp32(v16[e]);
            }
        for (size_t i = 0; i < q16.size(); ++i) qf[i] = fp16_to_fp32(q16[i] = fp32_to_fp16(g(rng)));
        const double scale = 1.0 / std::sqrt(static_cast<double>(D));
        std::vector<double> ref(static_cast<size_t>(run.n) * QD);
        double ref_max = 0;
        for (int t = 0; t < run.n; ++t)
          for (int h = 0; h < d.n_head; ++h) {
            const size_t base = (static_cast<size_t>(run.seq) * d.n_head_kv + h / G) * d.n_ctx;
            const int vis = run.p0 + t + 1;
            std::vector<double> s(static_cast<size_t>(vis));
            double mx = -INFINITY, sum = 0;
            for (int p = 0; p < vis; ++p) {
              double dot = 0;
              for (int i = 0; i < D; ++i) dot += double(qf[static_cast<size_t>(t) * QD + h * D + i]) * kf[(base + p) * D + i];
              mx = std::max(mx, s[p] = dot * scale);
            }
            for (double& x : s) sum += (x = std::exp(x - mx));
            for (int i = 0; i < D; ++i) {
              double o = 0;
              for (int p = 0; p < vis; ++p) o += s[p] * vf[(base + p) * D + i];
              ref[static_cast<size_t>(t) * QD + h * D + i] = o / sum;
              ref_max = std::max(ref_max, std::abs(o / sum));
            }
          }
        uint16_t *d_k = to_device(k16), *d_v = to_device(v16), *d_q = to_device(q16);
        float* d_out = to_device(std::vector<float>(static_cast<size_t>(run.n) * ldo, NAN));
        attention_prefill(d_q, run.n, run.p0, run.seq, d, LayerKv{reinterpret_cast<uint8_t*>(d_k),
                          reinterpret_cast<uint8_t*>(d_v), KvType::f16, 2 * D}, static_cast<float>(scale), d_out,
                          ldo, nullptr);
        const std::vector<float> out = to_host(d_out, static_cast<size_t>(run.n) * ldo);
        double err = 0;
        bool gap_kept = true;
        for (int t = 0; t < run.n; ++t) {
          for (int c = 0; c < QD; ++c) {
            const float x = out[static_cast<size_t>(t) * ldo + c];
            err = std::isfinite(x) ? std::max(err, std::abs(x - ref[static_cast<size_t>(t) * QD + c])) : INFINITY;
          }
          for (int c = QD; c < ldo; ++c) gap_kept = gap_kept && std::isnan(out[static_cast<size_t>(t) * ldo + c]);
        }
        std::printf("[cuda prefill attention D=%d G=%d n=%d p0=%d] max err %.2e of max |ref| %.2f\n", D, G, run.n,
                    run.p0, err / ref_max, ref_max);
        EXPECT_LT(err / ref_max, 2e-3) << "D=" << D << " G=" << G << " n=" << run.n << " p0=" << run.p0;
        EXPECT_TRUE(gap_kept) << "wrote outside its rows' q_dim columns";
        for (void* p : {(void*)d_k, (void*)d_v, (void*)d_q, (void*)d_out}) cudaFree(p);
      }
    }
  }
}

TEST(CudaPrefillAttention, RefusesWhatItCannotRun) {
  AttnDims d;
  d.n_head = 4, d.n_head_kv = 2, d.head_dim = 96, d.n_ctx = 100;
  EXPECT_FALSE(prefill_attention_supported(96));
  EXPECT_TRUE(prefill_attention_supported(128));
  EXPECT_THROW(attention_prefill(nullptr, 10, 0, 0, d, LayerKv{nullptr, nullptr, KvType::f16, 192}, 1.f, nullptr, 0,
                                 nullptr),
               Error);  // head_dim 96
  d.head_dim = 64;
  EXPECT_THROW(attention_prefill(nullptr, 10, 0, 0, d, LayerKv{nullptr, nullptr, KvType::int8, 72}, 1.f, nullptr, 0,
                                 nullptr),
               Error);  // compressed cache
  EXPECT_THROW(attention_prefill(nullptr, 10, 95, 0, d, LayerKv{nullptr, nullptr, KvType::f16, 128}, 1.f, nullptr, 0,
                                 nullptr),
               Error);  // positions past n_ctx
}

#else
TEST(CudaPrefillAttention, MatchesReference) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace brisk::test
