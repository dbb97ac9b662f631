// Weight upload, decode GEMV (T <= 8 tokens) and the cuBLAS GEMM path.
//
// GEMV: R = 2 rows a warp group, 4 warps per block; a group is 1 warp, or 2 (4 for Q8_0 at T > 1: split-K)
// when the matrix has few rows. Each lane walks its rows in 16-byte units (F32: 4
// elements, F16/BF16: 8, Q8_0: 16, Q4_0: 32), dequantizing in registers, with the token
// vectors read through L1 (they are shared by every row); the weight loads skip L1.
// Quantized weights use int8 activations and dp4a.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cublas_api.h"
#include "tensor/block_layouts.h"
#include "tensor/quant.h"
#include "util/error.h"

namespace brisk::cuda {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail("CUDA error in {}: {} ({})", what, cudaGetErrorString(e), static_cast<int>(e));
}
void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

static void check_blas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) fail("cuBLAS error in {}: status {}", what, static_cast<int>(st));
}

const char* wtype_name(WType t) {
  switch (t) {
    case WType::F32: return "f32";
    case WType::F16: return "f16";
    case WType::BF16: return "bf16";
    case WType::Q8_0: return "q8_0";
    case WType::Q4_0: return "q4_0";
  }
  return "?";
}

static size_t data_bytes(WType t, int64_t rows, int64_t cols) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  switch (t) {
    case WType::F32: return n * 4;
    case WType::F16:
    case WType::BF16: return n * 2;
    case WType::Q8_0: return n;
    case WType::Q4_0: return n / 2;
  }
  return 0;
}
static bool has_scales(WType t) { return t == WType::Q8_0 || t == WType::Q4_0; }

size_t DevMatrix::bytes() const {
  return data_bytes(type, rows, cols) + (has_scales(type) ? static_cast<size_t>(rows) * (cols / 32) * 2 : 0);
}

bool native_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::Q4_0;
}

DevMatrix upload_matrix(const TensorView* const* parts, int n_parts, bool force_f16) {
  if (n_parts < 1) fail("upload_matrix: no tensors");
  const DType src = parts[0]->type;
  const int64_t cols = parts[0]->ne[0];
  int64_t rows = 0;
  for (int i = 0; i < n_parts; ++i) {
    if (parts[i]->type != src || parts[i]->ne[0] != cols)
      fail("upload_matrix: '{}' ({} x {}) cannot be concatenated with '{}'", parts[i]->name,
           dtype_name(parts[i]->type), parts[i]->ne[0], parts[0]->name);
    rows += parts[i]->rows();
  }
  if (cols % 32 != 0) fail("CUDA: tensor '{}' row length {} is not a multiple of 32", parts[0]->name, cols);
  DevMatrix m;
  m.rows = rows;
  m.cols = cols;
  const bool native = native_type(src) && !force_f16;
  m.type = !native ? WType::F16
           : src == DType::F32 ? WType::F32
           : src == DType::F16 ? WType::F16
           : src == DType::BF16 ? WType::BF16
           : src == DType::Q8_0 ? WType::Q8_0 : WType::Q4_0;
  const size_t db = data_bytes(m.type, rows, cols);
  check(cudaMalloc(&m.data, db), "cudaMalloc(weights)");
  if (has_scales(m.type)) check(cudaMalloc(&m.scales, static_cast<size_t>(rows) * (cols / 32) * 2), "cudaMalloc(scales)");

  // Stage in chunks of rows through pinned memory, repacking as we go.
  const int64_t row_db = static_cast<int64_t>(data_bytes(m.type, 1, cols));
  const int64_t chunk_rows = std::max<int64_t>(1, (64 << 20) / std::max<int64_t>(row_db, 1));
  uint8_t* stage = nullptr;
  uint16_t* sstage = nullptr;
  check(cudaMallocHost(&stage, static_cast<size_t>(chunk_rows * row_db)), "cudaMallocHost");
  if (has_scales(m.type)) check(cudaMallocHost(&sstage, static_cast<size_t>(chunk_rows * (cols / 32) * 2)), "cudaMallocHost");
  std::vector<float> tmp(static_cast<size_t>(cols));
  int64_t done = 0;
  int part = 0;
  int64_t part_row = 0;
  while (done < rows) {
    const int64_t n = std::min(chunk_rows, rows - done);
    for (int64_t i = 0; i < n; ++i) {
      while (part_row >= parts[part]->rows()) ++part, part_row = 0;
      const uint8_t* r = parts[part]->row(part_row++);
      uint8_t* dst = stage + i * row_db;
      if (!native) {
        dequantize_row(src, r, tmp.data(), cols);
        uint16_t* h = reinterpret_cast<uint16_t*>(dst);
        for (int64_t k = 0; k < cols; ++k) h[k] = fp32_to_fp16(tmp[static_cast<size_t>(k)]);
      } else if (m.type == WType::Q8_0) {
        const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(r);
        for (int64_t j = 0; j < cols / 32; ++j) {
          std::memcpy(dst + j * 32, b[j].qs, 32);
          sstage[i * (cols / 32) + j] = b[j].d;
        }
      } else if (m.type == WType::Q4_0) {
        const BlockQ4_0* b = reinterpret_cast<const BlockQ4_0*>(r);
        for (int64_t j = 0; j < cols / 32; ++j) {
          std::memcpy(dst + j * 16, b[j].qs, 16);
          sstage[i * (cols / 32) + j] = b[j].d;
        }
      } else {
        std::memcpy(dst, r, static_cast<size_t>(row_db));
      }
    }
    check(cudaMemcpy(static_cast<uint8_t*>(m.data) + done * row_db, stage, static_cast<size_t>(n * row_db),
                     cudaMemcpyHostToDevice), "upload weights");
    if (has_scales(m.type))
      check(cudaMemcpy(static_cast<uint16_t*>(m.scales) + done * (cols / 32), sstage,
                       static_cast<size_t>(n * (cols / 32) * 2), cudaMemcpyHostToDevice), "upload scales");
    done += n;
  }
  cudaFreeHost(stage);
  if (sstage) cudaFreeHost(sstage);
  return m;
}

void free_matrix(DevMatrix& m) {
  if (m.data) cudaFree(m.data);
  if (m.scales) cudaFree(m.scales);
  m.data = m.scales = nullptr;
}

bool pdl_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("BRISK_CUDA_PDL");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

// ---------------------------------------------------------------------------------
// activation quantization for the dp4a GEMVs (see QuantAct)

size_t quant_act_bytes(int64_t cols, int T) {
  return static_cast<size_t>(T) * static_cast<size_t>(cols) + 2 * static_cast<size_t>(T) * (cols / 32) * 4 + 256;
}

QuantAct quant_act_in(void* buf, int64_t cols, int T) {
  QuantAct a;
  a.q = static_cast<int8_t*>(buf);
  a.d = reinterpret_cast<float*>(static_cast<uint8_t*>(buf) + ((T * cols + 255) / 256) * 256);
  a.s = a.d + T * (cols / 32);
  return a;
}

// One warp per block of 32: blk = t * nb + b.
__global__ void quantize_x_kernel(const float* __restrict__ x, int64_t ldx, int64_t cols, int T, QuantAct a) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t nb = cols / 32;
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (blk >= nb * T) return;  // whole warps
  const int t = static_cast<int>(blk / nb);
  const int64_t b = blk % nb;
  const int lane = threadIdx.x & 31;
  const float v[1] = {x[t * ldx + b * 32 + lane]};
  quantize_block32<1>(v, true, a.q + static_cast<int64_t>(t) * cols + b * 32 + lane, a.d + blk, a.s + blk);
}

// ---------------------------------------------------------------------------------
// GEMV kernels

constexpr int kWarps = 4;  // warps per block
constexpr int kRows = 2;   // rows per warp

template <WType WT>
__host__ __device__ constexpr int unit_elems() {
  return WT == WType::F32 ? 4 : (WT == WType::F16 || WT == WType::BF16) ? 8 : WT == WType::Q8_0 ? 16 : 32;
}

template <WType WT>
__device__ __forceinline__ void unpack8(const uint4& w, float* f) {
  const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (WT == WType::BF16) {
      f[2 * i] = __uint_as_float(u[i] << 16);
      f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    } else {
      const float2 p = __half22float2(*reinterpret_cast<const __half2*>(&u[i]));
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    }
  }
}

// No L2 prefetch of the weights before pdl_wait: pulling the first 4 units a lane-row into L2
// while the previous kernel finishes cost 6-7% of batch-1 decode in every type (8B shape,
// session 10: Q4_0 553.9 -> 588.3 tok/s without it, Q8_0 363.5 -> 389.9, BF16 241.7 ->
// 256.2), and 8 or 16 units cost more (BF16 226.9, 207.5). Likely (not measured with ncu):
// the megabytes requested early queue ahead of the loads of the short, latency-bound kernel
// still running, which is on the critical path.

// Q4_0 at T > 1 only: L2 prefetch of the first 4 units a lane-row before pdl_wait. Removed at
// one token in session 10 (+6% without it); at T > 1 its removal had cost Q4_0 9.8% at 8
// sequences (session 11: 8B batched decode 1,660 / 1,663 -> 1,820 / 1,827 tok/s with it; session
// 12: 1,652 -> 1,816), while Q8_0 and BF16 lost with it (session 12, two tables each: Q8_0
// 1,492 -> 1,448 and 1,506 -> 1,453, BF16 742 -> 725 and 746 -> 731).
template <int R>
__device__ __forceinline__ void prefetch_rows(const uint4* const (&wr)[R], int64_t units, int64_t u0, int step) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t u = u0 + static_cast<int64_t>(step) * i;
    if (u < units)
#pragma unroll
      for (int r = 0; r < R; ++r) prefetch_l2(wr[r] + u);
  }
}

// RoPE (Su et al. 2021, "RoFormer") of the pair (a, b) by an angle of cosine c and sine s, the
// products fused explicitly so the rounding does not depend on the compiler's contraction.
// qkv_post (attention.cu) rotates with plain expressions: the two paths may differ in the last
// bit of q (and so, rarely, of an f16 K); tests/cuda/cuda_qkv_rope_test.cpp bounds that.
__device__ __forceinline__ float rope_first(float a, float b, float c, float s) { return fmaf(a, c, -(b * s)); }
__device__ __forceinline__ float rope_second(float a, float b, float c, float s) { return fmaf(b, c, a * s); }

// Where a GEMV's row sums go: to y (RowsOut), or, for the qkv matrix of one decode token,
// through qkv_post's RoPE into q and the f16 KV cache (QkvRopeOut, see gemv_qkv_rope).
struct RowsOut {
  static constexpr bool kRope = false;
  struct Pre {};
  __device__ __forceinline__ Pre prepare(int64_t) const { return {}; }
};
struct QkvRopeOut {
  static constexpr bool kRope = true;
  AttnDims d;
  const float* inv_freq;
  const int32_t* pos;
  const int32_t* seq;
  float* q;
  uint16_t* k;
  uint16_t* v;
  // The RoPE angle of row pair r, before pdl_wait: pos is written by the host before the
  // step, by no kernel, so the double-precision sincos overlaps the previous kernel's tail
  // (measured: Q4_0 decode 509.8 -> 514.3 tok/s against computing it in the epilogue).
  struct Pre {
    float c = 1.f, s = 0.f;
  };
  __device__ __forceinline__ Pre prepare(int64_t r) const {
    Pre pre;
    const int D = d.head_dim;
    if (r < static_cast<int64_t>(d.n_head + d.n_head_kv) * D) {
      double sn, cs;  // as qkv_post: the angle in double precision (p * f reaches ~1e5 rad)
      sincos(static_cast<double>(pos[0]) * static_cast<double>(inv_freq[(r % D) / 2]), &sn, &cs);
      pre.c = static_cast<float>(cs), pre.s = static_cast<float>(sn);
    }
    return pre;
  }
  // Rows r, r + 1 (r even) are the sums a, b: with llama-style RoPE the pair (2i, 2i+1) of a
  // q or k head; v rows are stored as they are. The f16 codec encodes each number alone.
  __device__ __forceinline__ void store_pair(int64_t r, float a, float b, const Pre& pre) const {
    const int D = d.head_dim;
    const int64_t QD = static_cast<int64_t>(d.n_head) * D, KD = static_cast<int64_t>(d.n_head_kv) * D;
    const int i = static_cast<int>(r % D);  // even (D is even)
    // elements i, i + 1 of KV head h's row at (seq[0], pos[0]) in a cache laid out [seq][head][position]
    const auto cache_pair = [&](uint16_t* cache, int64_t h) {
      return reinterpret_cast<uint32_t*>(
          cache + ((static_cast<int64_t>(seq[0]) * d.n_head_kv + h) * d.n_ctx + pos[0]) * D + i);
    };
    if (r >= QD + KD) {
      *cache_pair(v, (r - QD - KD) / D) = pack16(a, b, false);
      return;
    }
    const float x0 = rope_first(a, b, pre.c, pre.s), x1 = rope_second(a, b, pre.c, pre.s);
    if (r < QD) {
      *reinterpret_cast<float2*>(q + r) = make_float2(x0, x1);
      return;
    }
    *cache_pair(k, (r - QD) / D) = pack16(x0, x1, false);
  }
};

// Sums each row's partial dot products over the lanes and, with split-K, over the ksplit
// warps that share the row (through shared memory); then writes y (or hands the row pair to
// a QkvRopeOut: NT = 1, rows even).
template <int NT, class Out>
__device__ __forceinline__ void store_rows(float (&acc)[kRows][NT], int ksplit, int warp, int lane, int64_t row0,
                                           int64_t rows, float* __restrict__ y, int64_t ldy, const Out& out,
                                           const typename Out::Pre& pre) {
  __shared__ float red[kWarps][kRows][NT];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      acc[r][t] = warp_sum(acc[r][t]);
      if (ksplit > 1 && lane == 0) red[warp][r][t] = acc[r][t];
    }
  if (ksplit > 1) {
    __syncthreads();
    if (warp % ksplit != 0) return;
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t)
        for (int j = 1; j < ksplit; ++j) acc[r][t] += red[warp + j][r][t];
  }
  if (lane != 0) return;
  if constexpr (Out::kRope) {
    if (row0 < rows) out.store_pair(row0, acc[0][0], acc[1][0], pre);
  } else {
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (row0 + r < rows)
#pragma unroll
        for (int t = 0; t < NT; ++t) y[t * ldy + row0 + r] = acc[r][t];
  }
}

// Float-activation GEMV for F32 / F16 / BF16.
template <WType WT, int NT, class Out>
__global__ void __launch_bounds__(kWarps * 32)
gemv_float_kernel(const uint8_t* __restrict__ W, int64_t rows, int64_t cols, const float* __restrict__ x,
                  int64_t ldx, float* __restrict__ y, int64_t ldy, int ksplit, Out out) {
  constexpr int E = unit_elems<WT>();
  pdl_launch_dependents();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int ks = warp % ksplit;  // this warp's share of the row: units lane + 32 ks + 32 ksplit i
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / ksplit) + warp / ksplit) * kRows;
  const bool active = row0 < rows;  // inactive warps still reach the block's barrier
  const int64_t units = cols / E;
  const uint4* wr[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    wr[r] = reinterpret_cast<const uint4*>(W) + min(row0 + r, rows - 1) * units;
  const typename Out::Pre pre = out.prepare(row0);
  pdl_wait();
  float acc[kRows][NT];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;

#pragma unroll 2
  for (int64_t u = lane + 32 * ks; active && u < units; u += 32 * ksplit) {
    uint4 w[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) w[r] = ld_stream(wr[r] + u);
    float wf[kRows][E];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if constexpr (WT == WType::F32) {
        wf[r][0] = __uint_as_float(w[r].x);
        wf[r][1] = __uint_as_float(w[r].y);
        wf[r][2] = __uint_as_float(w[r].z);
        wf[r][3] = __uint_as_float(w[r].w);
      } else {
        unpack8<WT>(w[r], wf[r]);
      }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float4* xp = reinterpret_cast<const float4*>(x + t * ldx + u * E);
      float xv[E];
#pragma unroll
      for (int i = 0; i < E / 4; ++i) {
        const float4 v = __ldg(xp + i);
        xv[4 * i] = v.x, xv[4 * i + 1] = v.y, xv[4 * i + 2] = v.z, xv[4 * i + 3] = v.w;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int i = 0; i < E; ++i) acc[r][t] = fmaf(wf[r][i], xv[i], acc[r][t]);
    }
  }
  store_rows<NT>(acc, ksplit, warp, lane, row0, rows, y, ldy, out, pre);
}

// dp4a GEMV for Q8_0 (unit = half a block) and Q4_0 (unit = one block).
//
// Units in flight: at one token each pass of the loop loads UB = 2 16-byte units of each of
// its rows and their scales, all before the first is used, then does the arithmetic unit by
// unit in order (the sums are those of one unit at a time). ncu of the Q4_0 decode step
// (session 9) showed these GEMVs latency-bound, not issue-bound: 11 of the 16 cycles between
// a warp's instructions waiting on memory, SM throughput 24-35%, DRAM 29-57%. Measured in
// the 8B decode step against the plain `#pragma unroll 2` loop (which T > 1 keeps: UB 2
// there lost 17% for Q4_0 at 8 sequences): Q4_0 +4%, Q8_0 +5% together with session 9's
// attention change (attention.cu); UB 4 took 72 registers and lost 8% for Q4_0. The BF16
// kernel with UB 4 was 2% faster on one H200 and 1.3% slower on another: the float GEMV keeps
// the plain loop.
//
// Blocks an SM at one token (session 12, 8B batch-1 decode against main, medians of three):
// the qkv-rope kernel at 12 (40 registers instead of 48; ptxas spills 20 bytes) so that qkv
// (1,536 blocks at 2 warps a row pair) runs in one wave instead of 1.16, and the other
// one-token kernels at 10 (Q4_0: 48 registers instead of 54, no spills; Q8_0 stays at 48):
// Q4_0 +0.7%, Q8_0 +1.8%. Twelve for every one-token kernel lost 14% for Q4_0 (32-byte spills).
template <WType WT, int NT, class Out>
__global__ void __launch_bounds__(kWarps * 32, Out::kRope ? 12 : NT == 1 ? 10 : 0)
gemv_q_kernel(const uint8_t* __restrict__ W, const uint16_t* __restrict__ scales, int64_t rows, int64_t cols,
              QuantAct xa, float* __restrict__ y, int64_t ldy, int ksplit, Out out) {
  constexpr int E = unit_elems<WT>();
  pdl_launch_dependents();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int ks = warp % ksplit;  // this warp's share of the row: units lane + 32 ks + 32 ksplit i
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / ksplit) + warp / ksplit) * kRows;
  const bool active = row0 < rows;  // inactive warps still reach the block's barrier
  const int64_t units = cols / E, nb = cols / 32;
  const uint4* wr[kRows];
  const uint16_t* sr[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = min(row0 + r, rows - 1);
    wr[r] = reinterpret_cast<const uint4*>(W) + row * units;
    sr[r] = scales + row * nb;
    // the first 32 scales of the row (64 bytes; without this Q4_0 decode was 0.7% slower)
    if (active && lane < nb) prefetch_l2(sr[r] + lane);
  }
  if constexpr (NT > 1 && WT == WType::Q4_0)
    if (active) prefetch_rows<kRows>(wr, units, lane + 32 * ks, 32 * ksplit);
  const typename Out::Pre pre = out.prepare(row0);
  pdl_wait();
  float acc[kRows][NT];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;

  constexpr int UB = NT == 1 ? 2 : 1;  // units in flight a row (see above)
  const int64_t stride = 32 * ksplit;
#pragma unroll(UB == 1 ? 2 : 1)
  for (int64_t u0 = lane + 32 * ks; active && u0 < units; u0 += stride * UB) {
    // UB units of each row (and their scales) in flight before the first is used
    uint4 wb[UB][kRows];
    uint16_t sb[UB][kRows];
#pragma unroll
    for (int b = 0; b < UB; ++b) {
      const int64_t u = u0 + b * stride, blk = WT == WType::Q8_0 ? u / 2 : u;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        wb[b][r] = u < units ? ld_stream(wr[r] + u) : make_uint4(0, 0, 0, 0);
        sb[b][r] = u < units ? __ldg(sr[r] + blk) : uint16_t(0);
      }
    }
#pragma unroll
    for (int b = 0; b < UB; ++b) {
      const int64_t u = u0 + b * stride;
      if (u >= units) break;
      const int64_t blk = WT == WType::Q8_0 ? u / 2 : u;
      const uint4 (&w)[kRows] = wb[b];
      float wd[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) wd[r] = __half2float(__ushort_as_half(sb[b][r]));
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const int8_t* xt = xa.q + static_cast<int64_t>(t) * cols + u * E;
        const float d = __ldg(xa.d + t * nb + blk);
        if constexpr (WT == WType::Q8_0) {
          const uint4 xv = __ldg(reinterpret_cast<const uint4*>(xt));
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            int s = 0;
            s = __dp4a(static_cast<int>(w[r].x), static_cast<int>(xv.x), s);
            s = __dp4a(static_cast<int>(w[r].y), static_cast<int>(xv.y), s);
            s = __dp4a(static_cast<int>(w[r].z), static_cast<int>(xv.z), s);
            s = __dp4a(static_cast<int>(w[r].w), static_cast<int>(xv.w), s);
            acc[r][t] = fmaf(wd[r] * d, static_cast<float>(s), acc[r][t]);
          }
        } else {
          const uint4 xlo = __ldg(reinterpret_cast<const uint4*>(xt));       // elements 0..15
          const uint4 xhi = __ldg(reinterpret_cast<const uint4*>(xt) + 1);   // 16..31
          const float sx = __ldg(xa.s + t * nb + blk);
          const int xl[4] = {static_cast<int>(xlo.x), static_cast<int>(xlo.y), static_cast<int>(xlo.z), static_cast<int>(xlo.w)};
          const int xh[4] = {static_cast<int>(xhi.x), static_cast<int>(xhi.y), static_cast<int>(xhi.z), static_cast<int>(xhi.w)};
#pragma unroll
          for (int r = 0; r < kRows; ++r) {
            const uint32_t wu[4] = {w[r].x, w[r].y, w[r].z, w[r].w};
            int s = 0;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              s = __dp4a(static_cast<int>(wu[i] & 0x0F0F0F0Fu), xl[i], s);
              s = __dp4a(static_cast<int>((wu[i] >> 4) & 0x0F0F0F0Fu), xh[i], s);
            }
            acc[r][t] = fmaf(wd[r], d * static_cast<float>(s) - 8.f * sx, acc[r][t]);
          }
        }
      }
    }
  }
  store_rows<NT>(acc, ksplit, warp, lane, row0, rows, y, ldy, out, pre);
}

// Split-K: warps that share a row (1, 2 or 4 of a block) so that a matrix of few rows still
// puts ~48 warps an SM in flight, keeping at least min_units units a lane (2; 1 for Q4_0 at
// one token). Measured on the H200
// (bench_gpu --gemv, T = 1, 1 -> 4 warps a row pair): 4096 x 14336 Q4_0 13.2 -> 12.0 us,
// Q8_0 25.2 -> 20.2, BF16 34.9 -> 32.0; 4096 x 4096 Q8_0 8.2 -> 7.1; but Q4_0 4.3 -> 4.9
// at 4096 columns (one unit a lane). In the decode step, though, at most 2 warps a row pair
// is faster for BF16 and Q4_0 (session 8, 8B shape, batch-1 decode: BF16 229.6 -> 239.9
// tok/s, Q4_0 512.7 -> 518.7), although the GEMVs alone, back to back, favour 4; and for
// Q8_0 at one token once the L2 weight prefetch was gone (session 10: 388.2 -> 396.8 tok/s;
// with the prefetch 4 had been better). Q8_0 at T > 1 keeps up to 4 (not measured there).
// Q4_0 at one token splits a row down to one unit a lane (qkv and wo of the 8B shape, 128
// units a row: 1 -> 2 warps), a matrix of many rows not at all: gate+up at 2 warps had won
// 2% with the L2 prefetch (session 9), and lost 1.3-1.6% without it (session 11).
static int gemv_ksplit(int64_t rows, int64_t units, int max_ks, int min_units) {
  static const int n_sm = [] {
    int dev = 0, n = 132;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n;
  }();
  const int64_t want = static_cast<int64_t>(n_sm) * 48, groups = (rows + kRows - 1) / kRows;
  int ks = 1;
  while (ks < max_ks && groups * ks < want && units >= 64 * ks * min_units) ks *= 2;
  return ks;
}

template <int NT, class Out = RowsOut>
static void gemv_nt(const DevMatrix& W, const float* x, int64_t ldx, float* y, int64_t ldy, void* scratch,
                    cudaStream_t s, const QuantAct* xq, const Out& out = {}) {
  const int64_t units = W.cols / (W.type == WType::F32 ? 4 : W.type == WType::Q8_0 ? 16 : W.type == WType::Q4_0 ? 32 : 8);
  const auto* w = static_cast<const uint8_t*>(W.data);
  // kernel(args..., ksplit, out) over the row pairs, ksplit warps a pair
  auto go = [&](auto kernel, auto... args) {
    const int ks = gemv_ksplit(W.rows, units, W.type == WType::Q8_0 && NT > 1 ? kWarps : 2,
                               NT == 1 && W.type == WType::Q4_0 ? 1 : 2);
    launch("gemv", kernel, grid_for(W.rows, kWarps / ks * kRows), dim3(kWarps * 32), 0, s, args..., ks, out);
  };
  switch (W.type) {
    case WType::F32: return go(gemv_float_kernel<WType::F32, NT, Out>, w, W.rows, W.cols, x, ldx, y, ldy);
    case WType::F16: return go(gemv_float_kernel<WType::F16, NT, Out>, w, W.rows, W.cols, x, ldx, y, ldy);
    case WType::BF16: return go(gemv_float_kernel<WType::BF16, NT, Out>, w, W.rows, W.cols, x, ldx, y, ldy);
    case WType::Q8_0:
    case WType::Q4_0: {
      QuantAct a;
      if (xq) {
        a = *xq;
      } else {
        a = quant_act_in(scratch, W.cols, NT);
        launch("quantize_x", quantize_x_kernel, grid_for(NT * (W.cols / 32), 8), dim3(256), 0, s, x, ldx, W.cols, NT, a);
      }
      const auto* sc = static_cast<const uint16_t*>(W.scales);
      if (W.type == WType::Q8_0) return go(gemv_q_kernel<WType::Q8_0, NT, Out>, w, sc, W.rows, W.cols, a, y, ldy);
      return go(gemv_q_kernel<WType::Q4_0, NT, Out>, w, sc, W.rows, W.cols, a, y, ldy);
    }
  }
}

void gemv(const DevMatrix& W, const float* x, int64_t ldx, int T, float* y, int64_t ldy, void* scratch,
          cudaStream_t s, const QuantAct* xq) {
  if (ldx % 4 != 0) fail("gemv: ldx {} must be a multiple of 4", ldx);
  switch (T) {
    case 1: return gemv_nt<1>(W, x, ldx, y, ldy, scratch, s, xq);
    case 2: return gemv_nt<2>(W, x, ldx, y, ldy, scratch, s, xq);
    case 3: return gemv_nt<3>(W, x, ldx, y, ldy, scratch, s, xq);
    case 4: return gemv_nt<4>(W, x, ldx, y, ldy, scratch, s, xq);
    case 5: return gemv_nt<5>(W, x, ldx, y, ldy, scratch, s, xq);
    case 6: return gemv_nt<6>(W, x, ldx, y, ldy, scratch, s, xq);
    case 7: return gemv_nt<7>(W, x, ldx, y, ldy, scratch, s, xq);
    case 8: return gemv_nt<8>(W, x, ldx, y, ldy, scratch, s, xq);
    default: fail("gemv: {} tokens (1..{} supported)", T, kMaxGemvTokens);
  }
}

bool qkv_rope_fusable(const AttnDims& d, KvType kv, bool bias_or_qk_norm) {
  return !d.neox && !bias_or_qk_norm && d.head_dim % 2 == 0 && (kv == KvType::f16 || kv == KvType::f32);
}

void gemv_qkv_rope(const DevMatrix& W, const float* x, void* scratch, const QuantAct* xq, const AttnDims& d,
                   const float* inv_freq, const int32_t* pos, const int32_t* seq, float* q_out, LayerKv kv,
                   cudaStream_t s) {
  if (!qkv_rope_fusable(d, kv.type, false))
    fail("gemv_qkv_rope: needs llama-style RoPE, an even head_dim and an f16 or f32 cache ({}, neox {}, head_dim {})",
         kv_type_name(kv.type), d.neox, d.head_dim);
  if (W.rows != static_cast<int64_t>(d.n_head + 2 * d.n_head_kv) * d.head_dim)
    fail("gemv_qkv_rope: {} rows, not the (n_head + 2 n_head_kv) x head_dim of q|k|v", W.rows);
  check_kv(kv, d);
  auto* k = reinterpret_cast<uint16_t*>(kv.k);
  auto* v = reinterpret_cast<uint16_t*>(kv.v);
  gemv_nt<1>(W, x, W.cols, nullptr, 0, scratch, s, xq, QkvRopeOut{d, inv_freq, pos, seq, q_out, k, v});
}

// ---------------------------------------------------------------------------------
// 16-bit conversions and the GEMM path

// Any type, one element a thread (the slow path: F32 and 16-bit conversions).
__global__ void dequant16_kernel(WType t, const void* data, const void* scales, int64_t rows, int64_t cols,
                                 uint16_t* out, bool bf16) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t n = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = load_elem(t, data, scales, cols, i / cols, i % cols);
    out[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(v)) : __half_as_ushort(__float2half_rn(v));
  }
}

// Q8_0 / Q4_0: one quant block of 32 a thread, 16-byte loads and stores (the batched
// decode path dequantizes every matrix per step: this runs at memory speed).
template <WType WT>
__global__ void dequant16_q_kernel(const uint8_t* __restrict__ data, const uint16_t* __restrict__ scales,
                                   int64_t n_blocks, uint4* __restrict__ out, bool bf16) {
  pdl_launch_dependents();
  pdl_wait();
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < n_blocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float d = half_bits_to_float(scales[b]);
    int8_t q[32];
    if constexpr (WT == WType::Q8_0) {
      *reinterpret_cast<uint4*>(q) = ld_stream(data + b * 32);
      *reinterpret_cast<uint4*>(q + 16) = ld_stream(data + b * 32 + 16);
    } else {
      const uint4 w = ld_stream(data + b * 16);
      const uint32_t u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int byte = (u[i / 4] >> (8 * (i % 4))) & 0xff;
        q[i] = static_cast<int8_t>((byte & 15) - 8);
        q[i + 16] = static_cast<int8_t>((byte >> 4) - 8);
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint4 o;
      o.x = pack16(d * q[8 * j + 0], d * q[8 * j + 1], bf16);
      o.y = pack16(d * q[8 * j + 2], d * q[8 * j + 3], bf16);
      o.z = pack16(d * q[8 * j + 4], d * q[8 * j + 5], bf16);
      o.w = pack16(d * q[8 * j + 6], d * q[8 * j + 7], bf16);
      out[b * 4 + j] = o;
    }
  }
}

void dequant_16(const DevMatrix& W, void* out, bool bf16, cudaStream_t s) {
  const auto* data = static_cast<const uint8_t*>(W.data);
  const auto* sc = static_cast<const uint16_t*>(W.scales);
  const int64_t nb = W.rows * (W.cols / 32);
  const unsigned grid = std::min<int64_t>(grid_for(nb, 256), 132 * 16);
  auto* o = static_cast<uint4*>(out);
  if (W.type == WType::Q8_0) return launch("dequant_16", dequant16_q_kernel<WType::Q8_0>, grid, dim3(256), 0, s, data, sc, nb, o, bf16);
  if (W.type == WType::Q4_0) return launch("dequant_16", dequant16_q_kernel<WType::Q4_0>, grid, dim3(256), 0, s, data, sc, nb, o, bf16);
  launch("dequant_16", dequant16_kernel, dim3(132 * 16), dim3(256), 0, s, W.type, W.data, W.scales, W.rows, W.cols,
         static_cast<uint16_t*>(out), bf16);
}

__global__ void to16_kernel(const float* __restrict__ x, int64_t n, uint16_t* __restrict__ out, bool bf16) {
  pdl_launch_dependents();
  pdl_wait();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x[i])) : __half_as_ushort(__float2half_rn(x[i]));
}

void to_16(const float* x, int64_t n, void* out, bool bf16, cudaStream_t s) {
  launch("to_16", to16_kernel, dim3(std::min<int64_t>(grid_for(n, 256), 132 * 16)), dim3(256), 0, s, x, n,
         static_cast<uint16_t*>(out), bf16);
}

void gemm(cublasHandle_t h, const DevMatrix& W, const float* x, int64_t T, float* y, int64_t ldy, void* wscratch,
          void* xscratch, cudaStream_t s, const uint16_t* x16) {
  check_blas(cublas_api().set_stream(h, s), "cublasSetStream");
  const float one = 1.f, zero = 0.f;
  const int m = static_cast<int>(W.rows), n = static_cast<int>(T), k = static_cast<int>(W.cols);
  if (W.type == WType::F32) {
    check_blas(cublas_api().sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, static_cast<const float*>(W.data), k, x, k,
                           &zero, y, static_cast<int>(ldy)),
               "cublasSgemm");
    return;
  }
  const bool bf16 = W.type == WType::BF16;
  const void* w = W.data;
  if (W.type == WType::Q8_0 || W.type == WType::Q4_0) {
    dequant_16(W, wscratch, false, s);
    w = wscratch;
  }
  if (!x16) {
    to_16(x, T * W.cols, xscratch, bf16, s);
    x16 = static_cast<const uint16_t*>(xscratch);
  }
  const cudaDataType dt = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  check_blas(cublas_api().gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w, dt, k, x16, dt, k, &zero, y,
                          CUDA_R_32F, static_cast<int>(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             "cublasGemmEx");
}

}  // namespace brisk::cuda
