// CUDA matrix products against the CPU reference (matmul_ref), every weight type, on the
// GEMV (T <= 8) and the cuBLAS (T > 8) paths. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/matmul_ref.h"
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
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
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
    for (int64_t cols : {256, 1024}) {
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
      ASSERT_EQ(cudaMalloc(&scratch, gemv_scratch_bytes(cols, kMaxGemvTokens)), cudaSuccess);
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
#else
TEST(CudaKernels, MatmulMatchesCpuReference) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace brisk::test
