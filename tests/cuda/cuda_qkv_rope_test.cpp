// The qkv GEMV with qkv_post's RoPE and K/V store in its epilogue (gemv_qkv_rope, the one-token
// decode path) against the two separate kernels it replaces (gemv, then qkv_post), for every
// weight type, row lengths with and without split-K, head sizes 64 / 128: V (not rotated) equal
// byte for byte, q within 1e-6 of max |q| and K within one f16 step (the rotation's products
// are fused in the epilogue, contracted by the compiler in qkv_post: last-bit differences), and
// nothing else of the caches written. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "model/cuda/cuda_model.h"
#include "model/rope_freqs.h"
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

// Elements of `unit` bytes that differ between a and b (same size).
template <class T>
size_t count_differing(const std::vector<T>& a, const std::vector<T>& b, size_t unit) {
  const auto* pa = reinterpret_cast<const uint8_t*>(a.data());
  const auto* pb = reinterpret_cast<const uint8_t*>(b.data());
  size_t n = 0;
  for (size_t i = 0; i < a.size() * sizeof(T); i += unit) n += std::memcmp(pa + i, pb + i, unit) != 0;
  return n;
}

TEST(CudaQkvRope, EpilogueMatchesGemvThenQkvPost) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int D : {64, 128}) {
    AttnDims d;
    d.n_head = 8, d.n_head_kv = 2, d.head_dim = D, d.n_ctx = 3000;
    const int64_t QD = d.n_head * D, rows = QD + 2 * d.n_head_kv * D;
    const std::vector<float> inv = rope_inv_freq(500000.f, D, {});
    float* d_inv = to_device(inv);
    const int n_seq = 2;
    for (KvType kt : {KvType::f16, KvType::f32}) {
      const int64_t RB = kv_row_bytes_of(kt, D);
      const size_t cache = static_cast<size_t>(n_seq) * d.n_head_kv * d.n_ctx * RB;
      for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
        for (int64_t cols : {256, 4096}) {  // 4096: 2-4 warps share a row pair (split-K)
          DevMatrix W = random_device_matrix(type, rows, cols, rng);
          std::vector<float> x(static_cast<size_t>(cols));
          for (auto& v : x) v = nd(rng);
          // a late position of sequence 1: large RoPE angles, a cache offset far from 0
          const std::vector<int32_t> pos{static_cast<int32_t>(rng() % d.n_ctx)}, seq{1};
          float* dx = to_device(x);
          int32_t *dpos = to_device(pos), *dseq = to_device(seq);
          void* scratch = dev_alloc<uint8_t>(quant_act_bytes(cols, 1));
          float* qkv = dev_alloc<float>(static_cast<size_t>(rows));
          float *q1 = to_device(std::vector<float>(QD, NAN)), *q2 = to_device(std::vector<float>(QD, NAN));
          const std::vector<uint8_t> poison(cache, 0xAB);
          uint8_t *k1 = to_device(poison), *v1 = to_device(poison), *k2 = to_device(poison), *v2 = to_device(poison);
          gemv(W, dx, cols, 1, qkv, rows, scratch, nullptr);
          qkv_post(qkv, 1, d, nullptr, nullptr, nullptr, nullptr, nullptr, d_inv, dpos, dseq, q1, nullptr,
                   LayerKv{k1, v1, kt, RB, nullptr}, nullptr);
          gemv_qkv_rope(W, dx, scratch, nullptr, d, d_inv, dpos, dseq, q2, LayerKv{k2, v2, kt, RB, nullptr}, nullptr);
          const std::vector<float> qa = to_host(q1, QD), qb = to_host(q2, QD);
          const std::vector<uint8_t> ka = to_host(k1, cache), kb = to_host(k2, cache);
          const std::vector<uint8_t> va = to_host(v1, cache), vb = to_host(v2, cache);
          // K: compare the token's rows decoded; every other byte must be equal (the poison)
          double q_err = 0, q_max = 0, k_err = 0, k_max = 0;
          for (int64_t i = 0; i < QD; ++i) {
            q_err = std::max(q_err, std::abs(double(qa[i]) - qb[i]));
            q_max = std::max(q_max, std::abs(double(qa[i])));
          }
          std::vector<uint8_t> ka_rest = ka, kb_rest = kb;
          for (int h = 0; h < d.n_head_kv; ++h) {
            const size_t row = ((static_cast<size_t>(seq[0]) * d.n_head_kv + h) * d.n_ctx + pos[0]) * RB;
            for (int i = 0; i < D; ++i) {
              uint16_t a, b;
              std::memcpy(&a, ka.data() + row + 2 * i, 2);
              std::memcpy(&b, kb.data() + row + 2 * i, 2);
              k_err = std::max(k_err, std::abs(double(fp16_to_fp32(a)) - fp16_to_fp32(b)));
              k_max = std::max(k_max, std::abs(double(fp16_to_fp32(a))));
            }
            std::memset(ka_rest.data() + row, 0, RB), std::memset(kb_rest.data() + row, 0, RB);
          }
          const size_t dq = count_differing(qa, qb, 4), dk = count_differing(ka, kb, 2), dv = count_differing(va, vb, 2);
          // both wrote the token's K/V rows (not left at the poison)
          const size_t row0 = ((static_cast<size_t>(seq[0]) * d.n_head_kv) * d.n_ctx + pos[0]) * RB;
          EXPECT_NE(std::memcmp(kb.data() + row0, poison.data(), RB), 0);
          EXPECT_NE(std::memcmp(vb.data() + row0, poison.data(), RB), 0);
          size_t nan_q = 0;
          for (float v : qb) nan_q += !std::isfinite(v);
          std::printf("[cuda qkv rope] %-5s D %3d cols %4lld kv %s: q %zu differ (max err %.1e of %.2f), K %zu halves "
                      "differ (max err %.1e of %.2f), V %zu\n",
                      std::string(dtype_name(type)).c_str(), D, static_cast<long long>(cols), kv_type_name(kt), dq,
                      q_err, q_max, dk, k_err, k_max, dv);
          EXPECT_EQ(nan_q, 0u);
          EXPECT_LE(q_err, 1e-6 * q_max) << dtype_name(type) << " D " << D << " cols " << cols;
          EXPECT_LE(k_err, k_max / 1024) << dtype_name(type) << " D " << D << " cols " << cols;  // f16: 11 bits
          EXPECT_EQ(count_differing(ka_rest, kb_rest, 2), 0u) << "K written outside the token's rows";
          EXPECT_EQ(dv, 0u) << dtype_name(type) << " D " << D << " cols " << cols;
          for (void* p : {(void*)dx, (void*)dpos, (void*)dseq, scratch, (void*)qkv, (void*)q1, (void*)q2, (void*)k1,
                          (void*)v1, (void*)k2, (void*)v2})
            cudaFree(p);
          free_matrix(W);
        }
      }
    }
    cudaFree(d_inv);
  }
}

TEST(CudaQkvRope, RefusesWhatItCannotFuse) {
  SKIP_WITHOUT_CUDA();
  AttnDims d;
  d.n_head = 2, d.n_head_kv = 1, d.head_dim = 64, d.n_ctx = 8;
  EXPECT_TRUE(qkv_rope_fusable(d, KvType::f16, false));
  EXPECT_FALSE(qkv_rope_fusable(d, KvType::f16, true));  // biases or q/k norm
  EXPECT_FALSE(qkv_rope_fusable(d, KvType::int8, false));
  d.neox = true;
  EXPECT_FALSE(qkv_rope_fusable(d, KvType::f16, false));
  std::mt19937 rng(3);
  DevMatrix W = random_device_matrix(DType::F16, 4 * 64, 64, rng);
  EXPECT_THROW(gemv_qkv_rope(W, nullptr, nullptr, nullptr, d, nullptr, nullptr, nullptr, nullptr,
                             LayerKv{nullptr, nullptr, KvType::f16, 128, nullptr}, nullptr),
               Error);
  free_matrix(W);
}
#else
TEST(CudaQkvRope, EpilogueMatchesGemvThenQkvPost) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace brisk::test
