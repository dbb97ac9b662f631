// CUDA matrix products against the CPU reference (matmul_ref), every weight type, on the
// GEMV (T <= 8) and the cuBLAS (T > 8) paths; the norm and SwiGLU (f32, quantized and 16-bit
// outputs); dequantization. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/matmul_ref.h"
#include "cuda_test_util.h"
#include "model/cuda/cuda_model.h"
#include "tensor/quant.h"

#if defined(BRISK_CUDA)
#include <cublas_v2.h>

#include "kernels/cuda/cuda_ops.h"
#endif

namespace brisk::test {
namespace {

#if defined(BRISK_CUDA)
using namespace brisk::cuda;

double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::abs(double(got[i]) - want[i]));
    den = std::max(den, std::abs(double(want[i])));
  }
  return num / den;
}


struct Case {
  DType type;
  double tol_gemv, tol_gemm;  // max |got - ref| / max |ref|
};

TEST(CudaKernels, MatmulMatchesCpuReference) {
  SKIP_WITHOUT_CUDA();
  // F32: fp32 everywhere (SGEMM without TF32). F16/BF16 GEMV: exact weights, fp32 math;
  // their GEMM rounds activations to the weight's 16-bit type. Q8_0/Q4_0 GEMV: int8
  // activations (one scale per 32); GEMM: f16 weights and activations. Q4_K: stored f16.
  const Case cases[] = {{DType::F32, 1e-5, 1e-5},  {DType::F16, 1e-5, 2e-3},  {DType::BF16, 1e-5, 1e-2},
                        {DType::Q8_0, 1e-2, 2e-3}, {DType::Q4_0, 1e-2, 2e-3}, {DType::Q4_K, 2e-3, 3e-3}};
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  cublasHandle_t blas;
  ASSERT_EQ(cublasCreate(&blas), CUBLAS_STATUS_SUCCESS);
  for (const Case& c : cases) {
    for (int64_t cols : {256, 1024, 4096}) {  // 4096: the GEMV splits rows over 2-4 warps
      const int64_t rows = 203;  // not a multiple of the 8 rows of a GEMV block
      const size_t rb = row_bytes(c.type, cols);
      std::vector<uint8_t> wbytes(rb * rows);
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : row) v = nd(rng) * 0.05f;
        quantize_row(c.type, row.data(), wbytes.data() + r * rb, cols);
      }
      TensorView tv;
      tv.name = "w";
      tv.type = c.type;
      tv.n_dims = 2;
      tv.ne = {cols, rows, 1, 1};
      tv.data = wbytes.data();
      DevMatrix m = upload_matrix(tv);
      void *dx, *dy;
      void *scratch, *wscr, *xscr;
      const int maxT = 40;
      ASSERT_EQ(cudaMalloc(&dx, sizeof(float) * maxT * cols), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&dy, sizeof(float) * maxT * rows), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&scratch, quant_act_bytes(cols, kMaxGemvTokens)), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&wscr, 2 * rows * cols), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&xscr, 2 * maxT * cols), cudaSuccess);
      for (int T : {1, 2, 3, 5, 8, 9, 40}) {
        std::vector<float> x(static_cast<size_t>(T * cols)), want(static_cast<size_t>(T * rows)), got(want.size());
        for (auto& v : x) v = nd(rng);
        matmul_ref(tv, x.data(), T, want.data());
        ASSERT_EQ(cudaMemcpy(dx, x.data(), sizeof(float) * x.size(), cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemset(dy, 0xFF, sizeof(float) * got.size()), cudaSuccess);  // NaN poison
        if (T <= kMaxGemvTokens)
          gemv(m, static_cast<float*>(dx), cols, T, static_cast<float*>(dy), rows, scratch, nullptr);
        else
          gemm(blas, m, static_cast<float*>(dx), T, static_cast<float*>(dy), rows, wscr, xscr, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(got.data(), dy, sizeof(float) * got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
        const double e = rel_err(got, want);
        const double tol = T <= kMaxGemvTokens ? c.tol_gemv : c.tol_gemm;
        EXPECT_LE(e, tol) << dtype_name(c.type) << " cols " << cols << " T " << T;
        std::printf("[cuda matmul] %-5s (stored %-4s) cols %5lld T %2d: rel err %.2e (tol %.0e)\n",
                    std::string(dtype_name(c.type)).c_str(), wtype_name(m.type), static_cast<long long>(cols), T, e,
                    tol);
      }
      cudaFree(dx), cudaFree(dy), cudaFree(scratch), cudaFree(wscr), cudaFree(xscr);
      free_matrix(m);
    }
  }
  cublasDestroy(blas);
}

// Matrices of many rows take the GEMV without split-K (one warp per row pair); the test
// above (203 rows) takes it with 2 or 4 warps per row pair at its longer rows.
TEST(CudaKernels, GemvManyRowsMatchesCpuReference) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t rows = 13001, cols = 256;
  for (DType type : {DType::BF16, DType::Q8_0, DType::Q4_0}) {
    const size_t rb = row_bytes(type, cols);
    std::vector<uint8_t> wbytes(rb * rows);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = nd(rng) * 0.05f;
      quantize_row(type, row.data(), wbytes.data() + r * rb, cols);
    }
    TensorView tv;
    tv.name = "w";
    tv.type = type;
    tv.n_dims = 2;
    tv.ne = {cols, rows, 1, 1};
    tv.data = wbytes.data();
    DevMatrix m = upload_matrix(tv);
    for (int T : {1, 3}) {
      std::vector<float> x(static_cast<size_t>(T * cols)), want(static_cast<size_t>(T * rows));
      for (auto& v : x) v = nd(rng);
      matmul_ref(tv, x.data(), T, want.data());
      float* dx = to_device(x);
      float* dy = dev_alloc<float>(want.size());
      void* scratch = dev_alloc<uint8_t>(quant_act_bytes(cols, T));
      ASSERT_EQ(cudaMemset(dy, 0xFF, sizeof(float) * want.size()), cudaSuccess);
      gemv(m, dx, cols, T, dy, rows, scratch, nullptr);
      const double e = rel_err(to_host(dy, want.size()), want);
      EXPECT_LE(e, type == DType::BF16 ? 1e-5 : 1e-2) << dtype_name(type) << " T " << T;
      std::printf("[cuda gemv %lld rows] %s T %d: rel err %.2e\n", static_cast<long long>(rows),
                  std::string(dtype_name(type)).c_str(), T, e);
      cudaFree(dx), cudaFree(dy), cudaFree(scratch);
    }
    free_matrix(m);
  }
}

// gemv of W on x quantized by a producer kernel (xq) must equal gemv on x with its own
// quantization, bit for bit (same arithmetic, other kernel).
void expect_same_gemv(const DevMatrix& W, const float* x, int T, const QuantAct& xq, const char* what) {
  const size_t n = static_cast<size_t>(T * W.rows);
  float *y1 = dev_alloc<float>(n), *y2 = dev_alloc<float>(n);
  void* scratch = dev_alloc<uint8_t>(quant_act_bytes(W.cols, T));
  ASSERT_EQ(cudaMemset(y2, 0xFF, sizeof(float) * n), cudaSuccess);
  gemv(W, x, W.cols, T, y1, W.rows, scratch, nullptr);
  gemv(W, nullptr, W.cols, T, y2, W.rows, nullptr, nullptr, &xq);
  const auto a = to_host(y1, n), b = to_host(y2, n);
  size_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  EXPECT_EQ(diff, 0u) << what << " " << wtype_name(W.type) << " T " << T;
  cudaFree(y1), cudaFree(y2), cudaFree(scratch);
}

// The residual add + RMSNorm and SwiGLU kernels against plain CPU formulas, and their
// quantized outputs against the GEMV's own activation quantization.
// got (f16 or bf16 bits) is want rounded to nearest even, element for element.
void expect_rounded(const std::vector<uint16_t>& got, const std::vector<float>& want, bool bf16, const char* what) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) bad += got[i] != (bf16 ? fp32_to_bf16(want[i]) : fp32_to_fp16(want[i]));
  EXPECT_EQ(bad, 0u) << what << (bf16 ? " bf16" : " f16") << ": elements not the f32 output rounded";
}

TEST(CudaKernels, NormAndSwigluMatchCpuAndQuantizeLikeGemv) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t n : {96, 1024, 5120}) {
    for (int T : {1, 3, 8}) {
      const size_t N = static_cast<size_t>(T * n);
      std::vector<float> x(N), d(N), w(static_cast<size_t>(n));
      for (auto& v : x) v = nd(rng);
      for (auto& v : d) v = nd(rng);
      for (auto& v : w) v = 1.f + 0.1f * nd(rng);
      // CPU: x += d; h = x / sqrt(mean(x^2) + eps) * w
      std::vector<float> xs(N), h(N);
      for (int t = 0; t < T; ++t) {
        double ss = 0;
        for (int64_t i = 0; i < n; ++i) {
          xs[t * n + i] = x[t * n + i] + d[t * n + i];
          ss += double(xs[t * n + i]) * xs[t * n + i];
        }
        const double sc = 1.0 / std::sqrt(ss / n + 1e-5);
        for (int64_t i = 0; i < n; ++i) h[t * n + i] = static_cast<float>(xs[t * n + i] * sc * w[i]);
      }
      float *dx = to_device(x), *dd = to_device(d), *dw = to_device(w), *dh;
      void* qbuf;
      dh = dev_alloc<float>(N);
      ASSERT_EQ(cudaMemset(dh, 0xFF, sizeof(float) * N), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&qbuf, quant_act_bytes(n, T)), cudaSuccess);
      const QuantAct qa = quant_act_in(qbuf, n, T);
      add_rmsnorm(dx, dd, dw, T, n, 1e-5f, dh, nullptr, &qa);
      const double ex = rel_err(to_host(dx, N), xs), eh = rel_err(to_host(dh, N), h);
      EXPECT_LE(ex, 1e-6) << "n " << n << " T " << T;
      EXPECT_LE(eh, 1e-5) << "n " << n << " T " << T;
      std::printf("[cuda norm] n %5lld T %d: residual rel err %.1e, norm rel err %.1e\n", static_cast<long long>(n),
                  T, ex, eh);
      for (DType ty : {DType::Q8_0, DType::Q4_0}) {
        DevMatrix W = random_device_matrix(ty, 77, n, rng);
        expect_same_gemv(W, dh, T, qa, "add_rmsnorm");
        free_matrix(W);
      }
      // 16-bit output for a GEMM (x already holds x + d): the f32 output rounded, bit for bit
      const std::vector<float> hf = to_host(dh, N);
      uint16_t* d16 = dev_alloc<uint16_t>(N);
      for (bool bf16 : {false, true}) {
        const Act16 o16{d16, bf16};
        add_rmsnorm(dx, nullptr, dw, T, n, 1e-5f, nullptr, nullptr, nullptr, &o16);
        expect_rounded(to_host(d16, N), hf, bf16, "add_rmsnorm");
      }
      // SwiGLU: gu = [gate | up] per token of F = n features
      std::vector<float> gu(2 * N), act(N);
      for (auto& v : gu) v = 2.f * nd(rng);
      for (int t = 0; t < T; ++t)
        for (int64_t i = 0; i < n; ++i) {
          const double g = gu[t * 2 * n + i], u = gu[t * 2 * n + n + i];
          act[t * n + i] = static_cast<float>(g / (1 + std::exp(-g)) * u);
        }
      float *dgu = to_device(gu), *dact;
      dact = dev_alloc<float>(N);
      ASSERT_EQ(cudaMemset(dact, 0xFF, sizeof(float) * N), cudaSuccess);
      swiglu(dgu, T, n, dact, nullptr);
      const double ea = rel_err(to_host(dact, N), act);
      EXPECT_LE(ea, 1e-5) << "n " << n << " T " << T;
      const std::vector<float> af = to_host(dact, N);
      for (bool bf16 : {false, true}) {
        const Act16 o16{d16, bf16};
        swiglu(dgu, T, n, nullptr, nullptr, nullptr, &o16);
        expect_rounded(to_host(d16, N), af, bf16, "swiglu");
      }
      cudaFree(d16);
      swiglu(dgu, T, n, nullptr, nullptr, &qa);
      for (DType ty : {DType::Q8_0, DType::Q4_0}) {
        DevMatrix W = random_device_matrix(ty, 77, n, rng);
        expect_same_gemv(W, dact, T, qa, "swiglu");
        free_matrix(W);
      }
      cudaFree(dx), cudaFree(dd), cudaFree(dw), cudaFree(dh), cudaFree(qbuf), cudaFree(dgu), cudaFree(dact);
    }
  }
}

// The fast Q8_0/Q4_0 dequantization of the batched path against the CPU's dequantize_row.
TEST(CudaKernels, DequantizeMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (DType ty : {DType::Q8_0, DType::Q4_0}) {
    const int64_t rows = 37, cols = 320;
    const size_t rb = row_bytes(ty, cols);
    std::vector<uint8_t> bytes(rb * rows);
    std::vector<float> row(static_cast<size_t>(cols)), want(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (auto& v : row) v = nd(rng);
      quantize_row(ty, row.data(), bytes.data() + r * rb, cols);
      dequantize_row(ty, bytes.data() + r * rb, want.data() + r * cols, cols);
    }
    TensorView tv;
    tv.name = "w";
    tv.type = ty;
    tv.n_dims = 2;
    tv.ne = {cols, rows, 1, 1};
    tv.data = bytes.data();
    DevMatrix W = upload_matrix(tv);
    for (bool bf16 : {false, true}) {
      uint16_t* out = dev_alloc<uint16_t>(want.size());
      ASSERT_EQ(cudaMemset(out, 0xFF, 2 * want.size()), cudaSuccess);
      dequant_16(W, out, bf16, nullptr);
      const auto got16 = to_host(out, want.size());
      std::vector<float> got(want.size());
      for (size_t i = 0; i < got.size(); ++i) got[i] = bf16 ? bf16_to_fp32(got16[i]) : fp16_to_fp32(got16[i]);
      const double e = rel_err(got, want);
      EXPECT_LE(e, bf16 ? 8e-3 : 1e-3) << dtype_name(ty) << (bf16 ? " bf16" : " f16");
      cudaFree(out);
    }
    free_matrix(W);
  }
}
#else
TEST(CudaKernels, MatmulMatchesCpuReference) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace brisk::test
