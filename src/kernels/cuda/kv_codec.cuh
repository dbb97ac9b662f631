// The KV codecs on the GPU (internal to src/kernels/cuda): the byte layouts of
// kernels/kv_format.h, written by qkv_post (one thread per number of a head vector) and read
// by the decode attention kernel (8 consecutive numbers per lane, dequantized in registers):
// f16, int8, int4 / int4r and nsn2.
// The encoders do the CPU encoders' arithmetic (kv/codec_*.cpp) operation for operation
// (IEEE division, round-half-even rintf, the same fp16 rounding), so a vector encodes to the
// same bytes on both; the one known difference: a group whose minimum is a zero of either
// sign may store -0 or +0 as its int4 minimum (fmin picks either), which decodes the same.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/kv_format.h"

namespace brisk::cuda {

// Bytes of one head vector of D numbers (kv_head_bytes for the GPU's codecs; f32 is stored
// as f16 on the GPU).
template <KvType C, int D>
__host__ __device__ constexpr int kv_row_bytes() {
  if constexpr (C == KvType::int8) return 2 * (D / 32) + D;
  else if constexpr (C == KvType::int4 || C == KvType::int4r) return 4 * (D / 32) + D / 2;
  else if constexpr (C == KvType::nsn2) return 4 + 2 * (D / kNsnSub);
  else return 2 * D;
}

__device__ __forceinline__ float warp_min(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// --- rotation R = H D / sqrt(d) (kv_format.h; the same signs and butterflies as kv_rotate) --
__device__ __forceinline__ float rot_sign(int i) {
  uint64_t z = (static_cast<uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return ((z ^ (z >> 31)) & 1) ? -1.0f : 1.0f;
}

// In-place unnormalized Walsh-Hadamard transform of x[0, D) in shared memory by the whole
// block (any blockDim); every butterfly is the CPU's (a + b, a - b), so results are equal.
__device__ __forceinline__ void fwht_shared(float* x, int D) {
  for (int h = 1; h < D; h <<= 1) {
    __syncthreads();
    for (int k = threadIdx.x; k < D / 2; k += blockDim.x) {
      const int j = (k / h) * 2 * h + k % h;
      const float a = x[j], b = x[j + h];
      x[j] = a + b;
      x[j + h] = a - b;
    }
  }
  __syncthreads();
}

// Thread i (< D, blockDim == D) holds x_i; returns (R x)_i. `scratch`: D floats of shared memory.
__device__ __forceinline__ float rotate_element(float x, int i, int D, float* scratch) {
  scratch[i] = x * rot_sign(i);
  fwht_shared(scratch, D);
  const float r = scratch[i] * (1.0f / sqrtf(static_cast<float>(D)));
  __syncthreads();  // scratch may be reused next
  return r;
}

// --- encode: thread i of a block of D threads (D % 32 == 0 for int8/int4) stores x_i -------
// Shared scratch of the block for nsn2's encoder.
struct Nsn2Scratch {
  float x[256];
  int code[256 / kNsnSub];
  double norm2;
};

// nsn2 (kv/codec_nsn2.cpp, NSNQuant arXiv 2505.18231): thread i of D holds the rotated x_i.
// The CPU's arithmetic, step for step: |x|^2 and the codewords' |c|^2 summed in double in
// index order (by one thread), distances as (a - c)^2 summed in float without fused
// multiply-adds (the CPU build has none), the first nearest codeword of the 256 (the 8
// threads of a sub-vector scan 32 each, ties to the lower index).
__device__ __forceinline__ void store_nsn2_element(float x, int i, int D, uint8_t* row, const float* __restrict__ cb,
                                                   Nsn2Scratch& sh) {
  __syncthreads();  // sh may still be read by the previous vector's encoding
  sh.x[i] = x;
  __syncthreads();
  if (i == 0) {
    double n2 = 0;
    for (int j = 0; j < D; ++j) n2 = __dadd_rn(n2, __dmul_rn(static_cast<double>(sh.x[j]), sh.x[j]));
    sh.norm2 = n2;
  }
  __syncthreads();
  const float norm = static_cast<float>(sqrt(sh.norm2));
  const float to_unit = norm > 0 ? sqrtf(static_cast<float>(D)) / norm : 0.0f;
  const float v = __fmul_rn(x, to_unit);
  const int lane = threadIdx.x & 31, e = i % kNsnSub, first = lane & ~(kNsnSub - 1);
  float a[kNsnSub];
#pragma unroll
  for (int t = 0; t < kNsnSub; ++t) a[t] = __shfl_sync(0xffffffffu, fabsf(v), first + t);
  float best_d = INFINITY;
  int best = 0;
  for (int j = e * (kNsnCodes / kNsnSub); j < (e + 1) * (kNsnCodes / kNsnSub); ++j) {
    float dd = 0;
#pragma unroll
    for (int t = 0; t < kNsnSub; ++t) {
      const float d = __fsub_rn(a[t], __ldg(cb + j * kNsnSub + t));
      dd = __fadd_rn(dd, __fmul_rn(d, d));
    }
    if (dd < best_d) best_d = dd, best = j;
  }
#pragma unroll
  for (int o = 1; o < kNsnSub; o <<= 1) {
    const float od = __shfl_xor_sync(0xffffffffu, best_d, o);
    const int oj = __shfl_xor_sync(0xffffffffu, best, o);
    if (od < best_d || (od == best_d && oj < best)) best_d = od, best = oj;
  }
  const uint32_t neg = __ballot_sync(0xffffffffu, v < 0);
  if (e == 0) {
    row[4 + 2 * (i / kNsnSub)] = static_cast<uint8_t>(neg >> first);
    row[4 + 2 * (i / kNsnSub) + 1] = static_cast<uint8_t>(best);
    sh.code[i / kNsnSub] = best;
  }
  __syncthreads();
  if (i == 0) {
    double code2 = 0;
    for (int k = 0; k < D / kNsnSub; ++k)
      for (int t = 0; t < kNsnSub; ++t) {
        const double c = cb[sh.code[k] * kNsnSub + t];
        code2 = __dadd_rn(code2, __dmul_rn(c, c));
      }
    const float scale = code2 > 0 ? static_cast<float>(__ddiv_rn(norm, sqrt(code2))) : 0.0f;
    *reinterpret_cast<float*>(row) = scale;
  }
}

__device__ __forceinline__ void store_kv_element(KvType t, float x, int i, int D, uint8_t* row,
                                                 const float* __restrict__ cb, Nsn2Scratch& sh) {
  if (t == KvType::nsn2) {
    store_nsn2_element(x, i, D, row, cb, sh);
  } else if (t == KvType::int8) {
    const float amax = warp_max(fabsf(x));
    const __half hs = __float2half_rn(amax / 127.0f);
    const float s = __half2float(hs);  // quantize against the scale actually stored
    if ((i & 31) == 0) reinterpret_cast<uint16_t*>(row)[i / 32] = __half_as_ushort(hs);
    const float v = s > 0 ? rintf(x / s) : 0.0f;
    reinterpret_cast<int8_t*>(row + 2 * (D / 32))[i] = static_cast<int8_t>(fmaxf(-127.0f, fminf(127.0f, v)));
  } else if (t == KvType::int4 || t == KvType::int4r) {
    const float lo = warp_min(x), hi = warp_max(x);
    const __half hs = __float2half_rn((hi - lo) / 15.0f), hm = __float2half_rn(lo);
    if ((i & 31) == 0) {
      reinterpret_cast<uint16_t*>(row)[2 * (i / 32)] = __half_as_ushort(hs);
      reinterpret_cast<uint16_t*>(row)[2 * (i / 32) + 1] = __half_as_ushort(hm);
    }
    const float s = __half2float(hs), m = __half2float(hm);
    const float v = s > 0 ? rintf((x - m) / s) : 0.0f;
    const uint32_t n = static_cast<uint32_t>(fmaxf(0.0f, fminf(15.0f, v)));
    const uint32_t hi_n = __shfl_down_sync(0xffffffffu, n, 1);
    if ((i & 1) == 0) row[4 * (D / 32) + i / 2] = static_cast<uint8_t>(n | (hi_n << 4));
  } else {  // f16 (and f32, stored as f16 on the GPU)
    reinterpret_cast<uint16_t*>(row)[i] = __half_as_ushort(__float2half_rn(x));
  }
}

// --- decode: lane li of a head vector's D / 8 lanes reads numbers [8 li, 8 li + 8) ----------
// (for nsn2 exactly sub-vector li: kNsnSub == 8)
// KvLane<C>: what one lane loads of one position (the raw bytes, scales included).
template <KvType C>
struct KvLane;
template <>
struct KvLane<KvType::f16> {
  uint4 h;  // 8 halves
};
template <>
struct KvLane<KvType::int8> {
  uint2 q;     // 8 int8
  uint16_t s;  // the group's half scale
};
template <>
struct KvLane<KvType::int4> {
  uint32_t q;   // 8 nibbles, number 2i in the low nibble of byte i
  uint32_t sm;  // the group's (half scale, half min)
};

template <>
struct KvLane<KvType::nsn2> {
  uint32_t code;  // the sub-vector's sign byte | codeword index << 8
  float s;        // the vector's scale
};

// 8 bytes at p, aligned to A (the row's alignment: rows are packed back to back).
template <int A>
__device__ __forceinline__ uint2 load8(const uint8_t* p) {
  if constexpr (A >= 8) {
    return *reinterpret_cast<const uint2*>(p);
  } else if constexpr (A == 4) {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(p);
    return make_uint2(w[0], w[1]);
  } else {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
    return make_uint2(h[0] | (static_cast<uint32_t>(h[1]) << 16), h[2] | (static_cast<uint32_t>(h[3]) << 16));
  }
}

template <KvType C, int D>
__device__ __forceinline__ KvLane<C> load_lane(const uint8_t* row, int li) {
  KvLane<C> r;
  if constexpr (C == KvType::int8) {
    constexpr int kAlign = (D / 16) >= 8 ? 8 : D / 16;  // gcd of the row bytes (D + D/16) and 8
    r.q = load8<kAlign>(row + 2 * (D / 32) + 8 * li);
    r.s = reinterpret_cast<const uint16_t*>(row)[li / 4];
  } else if constexpr (C == KvType::int4) {
    r.q = reinterpret_cast<const uint32_t*>(row + 4 * (D / 32))[li];
    r.sm = reinterpret_cast<const uint32_t*>(row)[li / 4];
  } else if constexpr (C == KvType::nsn2) {
    r.code = reinterpret_cast<const uint16_t*>(row + 4)[li];
    r.s = *reinterpret_cast<const float*>(row);
  } else {
    r.h = reinterpret_cast<const uint4*>(row)[li];
  }
  return r;
}

template <KvType C>
__device__ __forceinline__ KvLane<C> zero_lane() {
  KvLane<C> r;
  if constexpr (C == KvType::int8) r.q = make_uint2(0, 0), r.s = 0;
  else if constexpr (C == KvType::int4) r.q = 0, r.sm = 0;
  else if constexpr (C == KvType::nsn2) r.code = 0, r.s = 0.f;
  else r.h = make_uint4(0, 0, 0, 0);
  return r;
}

// cb: the nsn2 codebook (kNsnCodes x kNsnSub floats; unused by the other codecs).
template <KvType C>
__device__ __forceinline__ void decode_lane(const KvLane<C>& r, float (&x)[8], const float* __restrict__ cb) {
  if constexpr (C == KvType::int8) {
    const float s = half_bits_to_float(r.s);
    const uint32_t w[2] = {r.q.x, r.q.y};
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = s * static_cast<float>(static_cast<int8_t>(w[j / 4] >> (8 * (j % 4))));
  } else if constexpr (C == KvType::int4) {
    const float s = half_bits_to_float(static_cast<uint16_t>(r.sm));
    const float m = half_bits_to_float(static_cast<uint16_t>(r.sm >> 16));
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = fmaf(static_cast<float>((r.q >> (4 * j)) & 15u), s, m);
  } else if constexpr (C == KvType::nsn2) {
    const float4* c = reinterpret_cast<const float4*>(cb + (r.code >> 8) * kNsnSub);
    const float4 c0 = __ldg(c), c1 = __ldg(c + 1);
    const float cv[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = ((r.code >> j) & 1 ? -r.s : r.s) * cv[j];
  } else {
    const uint32_t w[4] = {r.h.x, r.h.y, r.h.z, r.h.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
      x[2 * j] = a.x, x[2 * j + 1] = a.y;
    }
  }
}

}  // namespace brisk::cuda
