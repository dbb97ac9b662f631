// Device helpers shared by the CUDA kernels of brisk (internal to src/kernels/cuda).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "kernels/cuda/cuda_ops.h"

namespace brisk::cuda {

// --- programmatic dependent launch (PDL, sm_90) ------------------------------------
// Every kernel of the forward pass is launched with programmatic stream serialization:
// the next kernel may start as soon as every block of the current one has started
// (pdl_launch_dependents at the top of each kernel), so its launch, its block ramp and
// whatever it reads that no earlier kernel writes (weights) overlap the tail of the
// current one. A kernel launched this way must call pdl_wait() before it reads anything
// an earlier kernel wrote, or writes anything an earlier kernel reads; pdl_wait returns
// once the previous grid has completed and its writes are visible (and, since that grid
// waited too, every grid before it). Without a programmatic predecessor both are no-ops.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Whether launches use PDL: on unless BRISK_CUDA_PDL=0 (for measuring what it buys).
bool pdl_enabled();

// kernel<<<grid, block, smem, s>>>(args...) with the PDL attribute; checks the launch.
template <class... KArgs, class... Args>
void launch(const char* name, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
            Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  check(cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(std::forward<Args>(args))...), name);
}

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

// Quantization of activations for the dp4a GEMVs, per block of 32 consecutive values:
// d = amax / 127, q = round(x / d), s = d * sum(q) (for Q4_0's "- 8" term). The block is
// held by 32 / V consecutive lanes, V values each (lane groups aligned to 32 / V); every
// lane of the warp must call this (the shuffles span the warp). Writes the V quants to
// q (4-byte aligned when V = 4) and, from the group's first lane, d and s when `store`.
template <int V>
__device__ __forceinline__ void quantize_block32(const float (&v)[V], bool store, int8_t* q, float* d_out,
                                                 float* s_out) {
  constexpr int kLanes = 32 / V;
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < V; ++i) amax = fmaxf(amax, fabsf(v[i]));
#pragma unroll
  for (int o = 1; o < kLanes; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float d = amax / 127.f;
  int qi[V];
  int sum = 0;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    qi[i] = amax == 0.f ? 0 : __float2int_rn(v[i] / d);
    sum += qi[i];
  }
#pragma unroll
  for (int o = 1; o < kLanes; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (!store) return;
  if constexpr (V == 4) {
    *reinterpret_cast<char4*>(q) = make_char4(static_cast<signed char>(qi[0]), static_cast<signed char>(qi[1]),
                                              static_cast<signed char>(qi[2]), static_cast<signed char>(qi[3]));
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) q[i] = static_cast<int8_t>(qi[i]);
  }
  if ((threadIdx.x & (kLanes - 1)) == 0) {
    *d_out = d;
    *s_out = d * static_cast<float>(sum);
  }
}

// Two floats as two f16 / bf16 (round to nearest even), a in the low half.
__device__ __forceinline__ uint32_t pack16(float a, float b, bool bf16) {
  if (bf16) return __bfloat16_as_ushort(__float2bfloat16_rn(a)) | (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(b))) << 16);
  return __half_as_ushort(__float2half_rn(a)) | (uint32_t(__half_as_ushort(__float2half_rn(b))) << 16);
}

inline unsigned grid_for(int64_t n, int block) { return static_cast<unsigned>((n + block - 1) / block); }

}  // namespace brisk::cuda
