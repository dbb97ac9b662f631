// The GPU KV codecs against the CPU ones: qkv_post's encoded K/V bytes against the CPU
// encoder's bytes for the same vectors, and decode attention over an encoded cache against
// a plain double-precision attention over the CPU decoder's values (odd lengths, several
// splits, ragged tokens); f16, int8, int4, int4r and nsn2. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kv/kv_codec.h"
#include "cuda_test_util.h"
#include "model/cuda/cuda_model.h"
#include "util/error.h"

#if defined(BRISK_CUDA)
#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_ops.h"
#endif

namespace brisk::test {
namespace {

#if defined(BRISK_CUDA)
using namespace brisk::cuda;



// Normal numbers with a few outlier channels (x20), as real K/V have.
std::vector<float> kv_like(size_t n, int64_t D, std::mt19937& rng) {
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = g(rng) * (i % static_cast<size_t>(D) == 3 ? 20.f : 1.f);
  return v;
}

const KvType kGpuTypes[] = {KvType::f16, KvType::int8, KvType::int4, KvType::int4r, KvType::nsn2};

// nsn2_codebook() on the GPU (freed at exit).
const float* device_codebook() {
  static const float* cb = to_device(std::vector<float>(nsn2_codebook(), nsn2_codebook() + kNsnCodes * kNsnSub));
  return cb;
}

// qkv_post with inv_freq = 0 (RoPE at angle 0 is the identity, exactly) so the stored K/V
// are the raw k/v: byte for byte what encode_kv_head writes, at every (seq, pos) written.
TEST(CudaKvCodec, EncodedBytesMatchCpuEncoder) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(11);
  for (int D : {64, 128}) {
    for (KvType type : kGpuTypes) {
      AttnDims d;
      d.n_head = 4, d.n_head_kv = 2, d.head_dim = D, d.n_ctx = 40;
      const int T = 37, n_seq = 2, QD = d.n_head * D, KD = d.n_head_kv * D, W = QD + 2 * KD;
      const int64_t RB = kv_row_bytes_of(type, D);
      ASSERT_EQ(RB, kv_head_bytes(type, D));
      const std::vector<float> qkv = kv_like(static_cast<size_t>(T) * W, D, rng);
      std::vector<int32_t> pos(T), seq(T);
      for (int t = 0; t < T; ++t) seq[t] = t % 2, pos[t] = (t * 7) % 39;  // scattered, distinct per seq
      const size_t cache_bytes = static_cast<size_t>(n_seq) * d.n_head_kv * d.n_ctx * RB;
      float* d_qkv = to_device(qkv);
      float* d_inv = to_device(std::vector<float>(D / 2, 0.f));
      int32_t *d_pos = to_device(pos), *d_seq = to_device(seq);
      float* d_q = to_device(std::vector<float>(static_cast<size_t>(T) * QD, NAN));
      uint8_t *d_k = to_device(std::vector<uint8_t>(cache_bytes, 0xAB)), *d_v = to_device(std::vector<uint8_t>(cache_bytes, 0xAB));
      qkv_post(d_qkv, T, d, nullptr, nullptr, nullptr, nullptr, nullptr, d_inv, d_pos, d_seq, d_q, nullptr,
               LayerKv{d_k, d_v, type, RB, device_codebook()}, nullptr);
      const std::vector<uint8_t> k = to_host(d_k, cache_bytes), v = to_host(d_v, cache_bytes);
      const std::vector<float> q = to_host(d_q, static_cast<size_t>(T) * QD);
      int vectors = 0, differ = 0;
      double q_err = 0;
      std::vector<uint8_t> want(static_cast<size_t>(RB));
      for (int t = 0; t < T; ++t) {
        for (int h = 0; h < d.n_head; ++h) {  // q: rotated for int4r, else as it came
          std::vector<float> w(qkv.begin() + t * W + h * D, qkv.begin() + t * W + (h + 1) * D);
          if (kv_rotated(type)) kv_rotate(w.data(), D);
          for (int i = 0; i < D; ++i) q_err = std::max(q_err, double(std::abs(q[t * QD + h * D + i] - w[i])));
        }
        for (int h = 0; h < d.n_head_kv; ++h) {
          const size_t row = ((static_cast<size_t>(seq[t]) * d.n_head_kv + h) * d.n_ctx + pos[t]) * RB;
          for (int which = 0; which < 2; ++which) {
            const float* x = qkv.data() + t * W + QD + which * KD + h * D;
            encode_kv_head(type, x, D, want.data());
            const std::vector<uint8_t>& got = which ? v : k;
            ++vectors;
            differ += std::memcmp(got.data() + row, want.data(), static_cast<size_t>(RB)) != 0;
          }
        }
      }
      std::printf("[cuda kv encode %s D=%d] %d of %d head vectors differ from the CPU encoder's bytes; q max err %.1e\n",
                  kv_type_name(type), D, differ, vectors, q_err);
      EXPECT_EQ(differ, 0) << kv_type_name(type) << " D=" << D;
      EXPECT_LE(q_err, 1e-5) << kv_type_name(type) << " D=" << D;
      for (void* p : {(void*)d_qkv, (void*)d_inv, (void*)d_pos, (void*)d_seq, (void*)d_q, (void*)d_k, (void*)d_v})
        cudaFree(p);
    }
  }
}

// Ragged decode attention over a cache encoded on the CPU: token t of sequence seq[t]
// attends to positions 0..pos[t] (lengths 1, 37, 1001, 3001: odd, not multiples of any split
// size, the long ones over many splits). Reference: double-precision softmax attention over
// decode_kv_head's values with the un-rotated query. Tolerance 2e-5 of max |ref| (fp32
// arithmetic, the rotation's rounding for int4r).
TEST(CudaKvCodec, DecodeAttentionMatchesReference) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(12);
  std::normal_distribution<float> g(0.f, 1.f);
  for (int D : {64, 128}) {
    for (KvType type : kGpuTypes) {
      AttnDims d;
      d.n_head = 8, d.n_head_kv = 2, d.head_dim = D, d.n_ctx = 3001;
      const int G = d.n_head / d.n_head_kv, QD = d.n_head * D, n_seq = 3;
      const std::vector<int32_t> pos = {0, 36, 1000, 3000}, seq = {2, 0, 1, 2};  // seq 2 twice (both lengths)
      const int T = static_cast<int>(pos.size());
      const int64_t RB = kv_row_bytes_of(type, D);
      const size_t rows = static_cast<size_t>(n_seq) * d.n_head_kv * d.n_ctx;
      const std::vector<float> kf = kv_like(rows * D, D, rng), vf = kv_like(rows * D, D, rng);
      std::vector<uint8_t> kb(rows * RB), vb(rows * RB);
      std::vector<float> kd(rows * D), vd(rows * D);  // what the cache stands for (un-rotated)
      for (size_t r = 0; r < rows; ++r) {
        encode_kv_head(type, kf.data() + r * D, D, kb.data() + r * RB);
        encode_kv_head(type, vf.data() + r * D, D, vb.data() + r * RB);
        decode_kv_head(type, kb.data() + r * RB, D, kd.data() + r * D);
        decode_kv_head(type, vb.data() + r * RB, D, vd.data() + r * D);
      }
      std::vector<float> q(static_cast<size_t>(T) * QD), q_in;
      for (float& x : q) x = g(rng);
      q_in = q;
      if (kv_rotated(type))
        for (int th = 0; th < T * d.n_head; ++th) kv_rotate(q_in.data() + th * D, D);
      const float scale = 1.0f / std::sqrt(static_cast<float>(D));
      std::vector<double> ref(static_cast<size_t>(T) * QD);
      double ref_max = 0;
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < d.n_head; ++h) {
          const size_t base = (static_cast<size_t>(seq[t]) * d.n_head_kv + h / G) * d.n_ctx;
          std::vector<double> s(static_cast<size_t>(pos[t]) + 1);
          double mx = -INFINITY, sum = 0;
          for (int p = 0; p <= pos[t]; ++p) {
            double dot = 0;
            for (int i = 0; i < D; ++i) dot += double(q[t * QD + h * D + i]) * kd[(base + p) * D + i];
            s[p] = dot * scale;
            mx = std::max(mx, s[p]);
          }
          for (double& x : s) sum += (x = std::exp(x - mx));
          for (int i = 0; i < D; ++i) {
            double o = 0;
            for (int p = 0; p <= pos[t]; ++p) o += s[p] * vd[(base + p) * D + i];
            ref[t * QD + h * D + i] = o / sum;
            ref_max = std::max(ref_max, std::abs(o / sum));
          }
        }
      uint8_t *d_k = to_device(kb), *d_v = to_device(vb);
      float* d_q = to_device(q_in);
      int32_t *d_pos = to_device(pos), *d_seq = to_device(seq);
      // Token 1 (37 positions) fills fewer than 7 splits of one block step each (16-64 positions
      // here), so it uses the same splits at 7 and at 32: its output must be bit for bit equal.
      std::vector<std::vector<float>> outs;
      for (int n_split : {1, 7, attention_splits(T, d, 132)}) {
        float* d_part = to_device(std::vector<float>(static_cast<size_t>(T) * d.n_head * n_split * (D + 2), NAN));
        float* d_out = to_device(std::vector<float>(static_cast<size_t>(T) * QD, NAN));
        attention_decode(d_q, T, d_pos, d_seq, d, LayerKv{d_k, d_v, type, RB, device_codebook()}, scale, n_split,
                         d_part, d_out, nullptr);
        const std::vector<float> out = to_host(d_out, static_cast<size_t>(T) * QD);
        double err = 0;
        for (size_t i = 0; i < out.size(); ++i)
          err = std::isfinite(out[i]) ? std::max(err, std::abs(out[i] - ref[i])) : INFINITY;
        std::printf("[cuda kv attention %s D=%d splits=%d] max err %.2e of max |ref| %.2f\n", kv_type_name(type), D,
                    n_split, err / ref_max, ref_max);
        EXPECT_LT(err / ref_max, 2e-5) << kv_type_name(type) << " D=" << D << " splits=" << n_split;
        outs.push_back(out);
        cudaFree(d_part), cudaFree(d_out);
      }
      ASSERT_EQ(attention_splits(T, d, 132), 32);
      for (int i = QD; i < 2 * QD; ++i)
        ASSERT_EQ(outs[1][i], outs[2][i]) << kv_type_name(type) << " D=" << D << " element " << i - QD;
      for (void* p : {(void*)d_k, (void*)d_v, (void*)d_q, (void*)d_pos, (void*)d_seq}) cudaFree(p);
    }
  }
}

TEST(CudaKvCodec, UnsupportedTypesAreRefused) {
  AttnDims d;
  d.n_head = 4, d.n_head_kv = 2, d.head_dim = 64;
  EXPECT_THROW(check_kv(LayerKv{nullptr, nullptr, KvType::kivi4, 40}, d), Error);
  EXPECT_THROW(check_kv(LayerKv{nullptr, nullptr, KvType::nsn2, 20}, d), Error);  // no codebook
  EXPECT_THROW(check_kv(LayerKv{nullptr, nullptr, KvType::int8, 64}, d), Error);  // wrong row bytes
  d.head_dim = 16;
  EXPECT_THROW(check_kv(LayerKv{nullptr, nullptr, KvType::int4, kv_row_bytes_of(KvType::int4, 16)}, d), Error);
  d.head_dim = 96;
  EXPECT_THROW(check_kv(LayerKv{nullptr, nullptr, KvType::int4r, kv_row_bytes_of(KvType::int4r, 96)}, d), Error);
  EXPECT_NO_THROW(check_kv(LayerKv{nullptr, nullptr, KvType::int8, kv_row_bytes_of(KvType::int8, 96)}, d));
}

#else
TEST(CudaKvCodec, EncodedBytesMatchCpuEncoder) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace brisk::test
