// Embedding gather, residual add + RMSNorm, row gather, SwiGLU.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "util/error.h"

namespace brisk::cuda {

__global__ void embed_kernel(WType t, const void* data, const void* scales, int64_t cols, const int32_t* ids,
                             float* out) {
  const int tok = blockIdx.x;
  const int64_t r = ids[tok];
  for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) out[tok * cols + k] = load_elem(t, data, scales, cols, r, k);
}

void embed_rows(const DevMatrix& W, const int32_t* ids, int T, float* out, cudaStream_t s) {
  if (T <= 0) return;
  embed_kernel<<<T, 256, 0, s>>>(W.type, W.data, W.scales, W.cols, ids, out);
  check_launch("embed_rows");
}

// One block per row. The row is read twice (sum of squares, then scale): it is in L1/L2.
__global__ void add_rmsnorm_kernel(float* __restrict__ x, const float* __restrict__ d, const float* __restrict__ w,
                                   int64_t n, float eps, float* __restrict__ out) {
  float* xr = x + blockIdx.x * n;
  const float* dr = d ? d + blockIdx.x * n : nullptr;
  float ss = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float v = xr[i];
    if (dr) {
      v += dr[i];
      xr[i] = v;
    }
    ss += v * v;
  }
  if (!w) return;
  ss = block_sum(ss);
  const float scale = rsqrtf(ss / static_cast<float>(n) + eps);
  float* o = out + blockIdx.x * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) o[i] = xr[i] * scale * w[i];
}

void add_rmsnorm(float* x, const float* d, const float* w, int64_t rows, int64_t n, float eps, float* out,
                 cudaStream_t s) {
  if (rows <= 0) return;
  const int threads = n >= 1024 ? 1024 : n >= 256 ? 256 : 64;
  add_rmsnorm_kernel<<<static_cast<unsigned>(rows), threads, 0, s>>>(x, d, w, n, eps, out);
  check_launch("add_rmsnorm");
}

__global__ void gather_kernel(const float* __restrict__ x, const int32_t* __restrict__ idx, int64_t n,
                              float* __restrict__ out) {
  const int64_t src = idx[blockIdx.x];
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[blockIdx.x * n + i] = x[src * n + i];
}

void gather_rows(const float* x, const int32_t* idx, int rows, int64_t n, float* out, cudaStream_t s) {
  if (rows <= 0) return;
  gather_kernel<<<rows, 256, 0, s>>>(x, idx, n, out);
  check_launch("gather_rows");
}

__global__ void swiglu_kernel(const float* __restrict__ gu, int64_t T, int64_t F, float* __restrict__ act) {
  const int64_t n = T * F;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / F, f = i % F;
    const float g = gu[t * 2 * F + f], u = gu[t * 2 * F + F + f];
    act[i] = g / (1.f + expf(-g)) * u;
  }
}

void swiglu(const float* gu, int64_t T, int64_t F, float* act, cudaStream_t s) {
  if (T <= 0) return;
  swiglu_kernel<<<std::min<int64_t>(grid_for(T * F, 256), 132 * 16), 256, 0, s>>>(gu, T, F, act);
  check_launch("swiglu");
}

}  // namespace brisk::cuda
