// Device helpers shared by the CUDA kernels of brisk (internal to src/kernels/cuda).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_ops.h"

namespace brisk::cuda {

// 16-byte load that bypasses L1 allocation: weights are streamed once per matmul and
// should not push the (reused) activations out of L1.
__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float red[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = 0;
  for (int i = 0; i < nw; ++i) r += red[i];
  return r;
}

__device__ __forceinline__ float bf16_bits_to_float(uint32_t lo16) { return __uint_as_float(lo16 << 16); }
__device__ __forceinline__ float half_bits_to_float(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

// Element k of row r of a device matrix, any WType (slow path: gathers, dequantization).
__device__ __forceinline__ float load_elem(WType t, const void* data, const void* scales,
                                           int64_t cols, int64_t r, int64_t k) {
  switch (t) {
    case WType::F32: return static_cast<const float*>(data)[r * cols + k];
    case WType::F16: return half_bits_to_float(static_cast<const uint16_t*>(data)[r * cols + k]);
    case WType::BF16: return bf16_bits_to_float(static_cast<const uint16_t*>(data)[r * cols + k]);
    case WType::Q8_0: {
      const float d = half_bits_to_float(static_cast<const uint16_t*>(scales)[r * (cols / 32) + k / 32]);
      return d * static_cast<const int8_t*>(data)[r * cols + k];
    }
    case WType::Q4_0: {
      const float d = half_bits_to_float(static_cast<const uint16_t*>(scales)[r * (cols / 32) + k / 32]);
      const int j = static_cast<int>(k % 32);
      const uint8_t b = static_cast<const uint8_t*>(data)[r * (cols / 2) + (k / 32) * 16 + (j & 15)];
      const int q = j < 16 ? (b & 15) : (b >> 4);
      return d * static_cast<float>(q - 8);
    }
  }
  return 0.f;
}

inline unsigned grid_for(int64_t n, int block) { return static_cast<unsigned>((n + block - 1) / block); }

}  // namespace brisk::cuda
