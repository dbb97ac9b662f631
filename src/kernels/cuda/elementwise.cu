// Embedding gather, residual add + RMSNorm, row gather, SwiGLU. The norm and SwiGLU can
// write their output already quantized for the consumer's dp4a GEMV (one launch fewer a
// consumer: the decode step is a chain of short kernels), or as the consumer GEMM's 16-bit
// input (prefill: no conversion pass, half the bytes written).
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "util/error.h"

namespace brisk::cuda {

__global__ void embed_kernel(WType t, const void* data, const void* scales, int64_t cols, const int32_t* ids,
                             float* out) {
  pdl_launch_dependents();
  pdl_wait();
  const int tok = blockIdx.x;
  const int64_t r = ids[tok];
  for (int64_t k = threadIdx.x; k < cols; k += blockDim.x) out[tok * cols + k] = load_elem(t, data, scales, cols, r, k);
}

void embed_rows(const DevMatrix& W, const int32_t* ids, int T, float* out, cudaStream_t s) {
  if (T <= 0) return;
  launch("embed_rows", embed_kernel, dim3(T), dim3(256), 0, s, W.type, W.data, W.scales, W.cols, ids, out);
}

// One block per row; thread i holds float4 chunks i, i + blockDim, ... (at most kNormChunks)
// in registers between the sum of squares and the scaling. 8 consecutive threads hold a
// block of 32 values for the quantized output. The norm weights (written by no kernel) are
// loaded before pdl_wait, so their latency overlaps the previous kernel's tail.
constexpr int kNormChunks = 4;
constexpr int kNormThreads = 1024;

// What the norm and SwiGLU write: f32, int8 blocks for a GEMV, or 16-bit for a GEMM.
enum class ActOut { f32, quant, half };

template <ActOut OUT>
__global__ void __launch_bounds__(kNormThreads)
add_rmsnorm_kernel(float* __restrict__ x, const float* __restrict__ d, const float* __restrict__ w, int64_t n,
                   float eps, float* __restrict__ out, QuantAct qa, Act16 o16) {
  pdl_launch_dependents();
  const int64_t n4 = n / 4;
  float4 g[kNormChunks];
  if (w) {
    const float4* w4 = reinterpret_cast<const float4*>(w);
#pragma unroll
    for (int j = 0; j < kNormChunks; ++j) {
      const int64_t i = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
      g[j] = i < n4 ? w4[i] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
  pdl_wait();
  float4* xr = reinterpret_cast<float4*>(x + blockIdx.x * n);
  const float4* dr = d ? reinterpret_cast<const float4*>(d + blockIdx.x * n) : nullptr;
  float4 v[kNormChunks];
  float ss = 0.f;
#pragma unroll
  for (int j = 0; j < kNormChunks; ++j) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
    v[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (i < n4) {
      v[j] = xr[i];
      if (dr) {
        const float4 a = dr[i];
        v[j].x += a.x, v[j].y += a.y, v[j].z += a.z, v[j].w += a.w;
        xr[i] = v[j];
      }
      ss += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
    }
  }
  if (!w) return;
  ss = block_sum(ss);
  const float scale = rsqrtf(ss / static_cast<float>(n) + eps);
  float4* o4 = reinterpret_cast<float4*>(out + blockIdx.x * n);
#pragma unroll
  for (int j = 0; j < kNormChunks; ++j) {
    const int64_t i = threadIdx.x + static_cast<int64_t>(j) * blockDim.x;
    if (j * static_cast<int64_t>(blockDim.x) >= n4) break;  // uniform over the block
    const bool valid = i < n4;
    float o[4] = {0.f, 0.f, 0.f, 0.f};
    if (valid) {
      o[0] = v[j].x * scale * g[j].x, o[1] = v[j].y * scale * g[j].y, o[2] = v[j].z * scale * g[j].z,
      o[3] = v[j].w * scale * g[j].w;
      if constexpr (OUT == ActOut::half)
        reinterpret_cast<uint2*>(o16.p + blockIdx.x * n)[i] =
            make_uint2(pack16(o[0], o[1], o16.bf16), pack16(o[2], o[3], o16.bf16));
      else
        o4[i] = make_float4(o[0], o[1], o[2], o[3]);
    }
    if constexpr (OUT == ActOut::quant) {
      const int64_t e = blockIdx.x * n + 4 * i;  // flat element index; its block is e / 32
      quantize_block32<4>(o, valid, qa.q + e, qa.d + e / 32, qa.s + e / 32);
    }
  }
}

void add_rmsnorm(float* x, const float* d, const float* w, int64_t rows, int64_t n, float eps, float* out,
                 cudaStream_t s, const QuantAct* qout, const Act16* out16) {
  if (rows <= 0) return;
  if (n % 32 != 0 || n > 4 * kNormChunks * kNormThreads)
    fail("add_rmsnorm: row length {} unsupported (a multiple of 32, at most {})", n, 4 * kNormChunks * kNormThreads);
  // two float4 a thread where the row allows (512 threads at n = 4096 against 1024 threads of
  // one, 8B batch-1 decode: +0.4-0.9% in session 10, Q4_0 +0.8%, Q8_0 +1.0-1.3%, BF16 +0.2% in
  // session 11; 256 threads of four lost 1.6-3.1%), a multiple of 32
  const int64_t n4 = n / 4;
  const int threads = static_cast<int>(std::min<int64_t>(kNormThreads, std::max<int64_t>(32, (n4 + 63) / 64 * 32)));
  const QuantAct qa = qout ? *qout : QuantAct{};
  const Act16 o16 = out16 ? *out16 : Act16{};
  auto go = [&](auto kernel) {
    launch("add_rmsnorm", kernel, dim3(rows), dim3(threads), 0, s, x, d, w, n, eps, out, qa, o16);
  };
  if (qout && w) go(add_rmsnorm_kernel<ActOut::quant>);
  else if (out16 && w) go(add_rmsnorm_kernel<ActOut::half>);
  else go(add_rmsnorm_kernel<ActOut::f32>);
}

__global__ void gather_kernel(const float* __restrict__ x, const int32_t* __restrict__ idx, int64_t n,
                              float* __restrict__ out) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t src = idx[blockIdx.x];
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[blockIdx.x * n + i] = x[src * n + i];
}

void gather_rows(const float* x, const int32_t* idx, int rows, int64_t n, float* out, cudaStream_t s) {
  if (rows <= 0) return;
  launch("gather_rows", gather_kernel, dim3(rows), dim3(256), 0, s, x, idx, n, out);
}

// Thread i of the grid-wide sweep handles 4 consecutive outputs; every lane of a warp runs
// the same iterations (the quantization shuffles span the warp), F % 32 == 0 keeps each
// group of 8 lanes (one quant block) inside one token's row and all valid or all not.
template <ActOut OUT>
__global__ void swiglu_kernel(const float* __restrict__ gu, int64_t T, int64_t F, float* __restrict__ act,
                              QuantAct qa, Act16 o16) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t n4 = T * F / 4, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i - threadIdx.x % 32 < n4;
       i += stride) {
    const bool valid = i < n4;
    float o[4] = {0.f, 0.f, 0.f, 0.f};
    const int64_t e = 4 * i, t = e / F, f = e % F;
    if (valid) {
      const float4 g = *reinterpret_cast<const float4*>(gu + t * 2 * F + f);
      const float4 u = *reinterpret_cast<const float4*>(gu + t * 2 * F + F + f);
      o[0] = g.x / (1.f + expf(-g.x)) * u.x;
      o[1] = g.y / (1.f + expf(-g.y)) * u.y;
      o[2] = g.z / (1.f + expf(-g.z)) * u.z;
      o[3] = g.w / (1.f + expf(-g.w)) * u.w;
    }
    if constexpr (OUT == ActOut::quant) {
      quantize_block32<4>(o, valid, qa.q + e, qa.d + e / 32, qa.s + e / 32);
    } else if (OUT == ActOut::half && valid) {
      *reinterpret_cast<uint2*>(o16.p + e) = make_uint2(pack16(o[0], o[1], o16.bf16), pack16(o[2], o[3], o16.bf16));
    } else if (valid) {
      *reinterpret_cast<float4*>(act + e) = make_float4(o[0], o[1], o[2], o[3]);
    }
  }
}

void swiglu(const float* gu, int64_t T, int64_t F, float* act, cudaStream_t s, const QuantAct* qout,
            const Act16* out16) {
  if (T <= 0) return;
  if (F % 32 != 0) fail("swiglu: {} features (a multiple of 32 needed)", F);
  const dim3 grid(std::min<int64_t>(grid_for(T * F / 4, 256), 132 * 16));
  if (qout)
    launch("swiglu", swiglu_kernel<ActOut::quant>, grid, dim3(256), 0, s, gu, T, F, act, *qout, Act16{});
  else if (out16)
    launch("swiglu", swiglu_kernel<ActOut::half>, grid, dim3(256), 0, s, gu, T, F, act, QuantAct{}, *out16);
  else
    launch("swiglu", swiglu_kernel<ActOut::f32>, grid, dim3(256), 0, s, gu, T, F, act, QuantAct{}, Act16{});
}

}  // namespace brisk::cuda
