// Experiment for issue 5 (batch-1 decode at >= 85% of copy bandwidth): how fast can the
// 8B Q4_0 decode step's matrices be streamed when one persistent kernel walks them all, with a
// grid-wide barrier wherever a matrix needs the previous one's output?
//
// Each SM runs one block: a producer lane streams the SM's slice of every matrix of the step,
// in order, into a ring of 16 KB shared-memory slots with bulk copies (cp.async.bulk +
// mbarrier), regardless of matrix boundaries; twelve consumer warps, in teams of three that
// share a slot, wait at a grid barrier for the previous matrix's output, normalize and quantize
// it (as RMSNorm + Q8 activation quantization would), then take the slots as they fill. DRAM
// keeps streaming the next matrix's weights while the consumers sit at a barrier, which
// separate kernels cannot do. Standalone, not part of the engine: random weights of the real
// shapes, every output checked against a plain kernel. Modes (kModes) take parts of the chain
// away to see what each costs; results and reading in bench/gpu/NOTES.md, session 25.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/gpu/stream_chain.cu -o /tmp/stream_chain
//   /tmp/stream_chain [layers]   (a table: mode, us a step, GB/s, % of the D2D copy)
// Variants: -DSLOT=bytes (16384), -DCONSUMERS=warps (12), -DTEAM=warps a slot (3), -DPAIR=rows a
// warp computes at once (2).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                               \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

#ifndef SLOT
#define SLOT 16384
#endif
constexpr int kSlot = SLOT;            // bytes of one ring slot (whole rows of one matrix)
#ifndef CONSUMERS
#define CONSUMERS 12
#endif
#ifndef TEAM
#define TEAM 3
#endif
constexpr int kConsumers = CONSUMERS;  // consumer warps a block; the last warp is the producer
// Warps that share a chunk, taking its rows r, r + kTeam, ...: a matrix's last chunk then costs
// a team ceil(rows / kTeam) rows instead of one warp all of them.
constexpr int kTeam = TEAM;
#ifndef PAIR
#define PAIR 2
#endif
constexpr int kPair = PAIR;  // rows a warp takes at once (1 or 2)
constexpr int kTeams = kConsumers / kTeam;
static_assert(kConsumers % kTeam == 0, "teams of equal size");
constexpr int kThreads = 32 * (kConsumers + 1);
constexpr int kMaxCols = 14336;

// One matrix of the step. A row is [cols/32 fp16 scales][cols/2 bytes of Q4_0 nibbles], so a
// block's rows are one contiguous range and a slot holds whole rows.
struct Mat {
  int64_t offset;  // bytes into the weight buffer
  int rows, cols, rowbytes, rows_per_slot;
  int in;          // index of the matrix whose output (first cols values) is this one's input; -1: x0
  int64_t y;       // offset of this matrix's output in the y buffer (floats)
};

// What the consumers do before and in each matrix. The real chain is mode 0; the others take
// parts away to see what each costs (modes 3, 5, 6 and 7 give wrong outputs).
struct Mode {
  const char* name;
  bool barrier;       // a grid barrier before each matrix that has an input matrix
  bool norm_each;     // norm_quant before each matrix (else once, of x0)
  bool input_from_y;  // norm_quant reads the input matrix's output (else x0)
  int compute;        // 0: no dot products, 1: all, 2: every other row
  // The blocks that write a matrix's output also write it as Q8 blocks (int8 codes, scale, sum
  // of codes, sum of squares), their slices in whole 32-row groups; the next matrix reads those
  // instead of a float pass (norm_each must be false). Q8 codes do not depend on the RMS
  // factor, which only scales each block's d.
  bool producer_quant;
};
constexpr Mode kModes[] = {
    {"0 barrier + norm each matrix (the chain)", true, true, true, 1, false},
    {"1 norm of x0 each matrix, no barrier", false, true, false, 1, false},
    {"2 x once", false, false, false, 1, false},
    {"3 no compute", false, false, false, 0, false},
    {"4 barrier, x once", true, false, false, 1, false},
    {"5 as 0, half the rows computed", true, true, true, 2, false},
    {"6 barrier, no compute", true, false, false, 0, false},
    {"7 barrier + norm each matrix, no compute", true, true, true, 0, false},
    {"8 the chain, input quantized by its producers", true, false, true, 1, true},
};
constexpr int kNumModes = sizeof(kModes) / sizeof(kModes[0]);

struct Step {
  const uint8_t* w;
  const Mat* mats;
  int n_mats;
  const float* x0;
  float* y;
  unsigned* barrier;  // zeroed before each launch
  // producer_quant: each matrix's output as Q8 blocks, at the y offsets (codes) and y / 32
  int8_t* qx;
  float* qd;   // block scale (max |y| / 127)
  int* qs;     // sum of the block's codes
  float* qss;  // sum of the block's squares
  int n_slots;        // ring depth: <= kMaxSlots, a multiple of kTeams
  Mode mode;
};
constexpr int kMaxSlots = 196608 / kSlot;
constexpr int kMaxBlockRows = 256;  // producer_quant: 32-row groups of one block (the head: 8)

static_assert(kMaxSlots >= kTeams, "the ring needs a slot for every team");

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* b, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(b)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(b)) : "memory");
}
// A wait that never ends is a bug here: trap after ~1 s instead of hanging the call.
__device__ __forceinline__ void mbar_wait(uint64_t* b, unsigned parity) {
  uint32_t done;
  const long long t0 = clock64();
  do {
    if (clock64() - t0 > 2000000000LL) __trap();
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(b)), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(32 * kConsumers) : "memory"); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// This block's rows [r0, r1) of m and its chunk count.
__device__ __forceinline__ void slice(const Mat& m, bool groups, int& r0, int& r1) {
  const int64_t n = groups ? m.rows / 32 : m.rows, unit = groups ? 32 : 1;
  r0 = static_cast<int>(n * blockIdx.x / gridDim.x * unit);
  r1 = static_cast<int>(n * (blockIdx.x + 1) / gridDim.x * unit);
}

// x = Q8 blocks of in[0:cols] / rms(in[0:cols]): xq int8, xd the block scale, xs the block's
// sum of codes (for Q4_0's -8). Run by the consumer threads; the reference kernel runs the
// same code with as many threads, so both see the same bytes. Eight lanes a 32-block, each
// with a float4; all of a thread's loads issued at once (one L2 round trip), the values kept in
// registers between the sum of squares and the quantization.
constexpr int kGroups = 32 * kConsumers / 8;
constexpr int kMaxIter = (kMaxCols / 32 + kGroups - 1) / kGroups;
__device__ void norm_quant(const float* in, int cols, int8_t* xq, float* xd, int* xs, float* red, int tid) {
  const int nb = cols / 32, grp = tid / 8, sub = tid % 8;
  float4 v[kMaxIter];
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < kMaxIter; ++i) {
    const int blk = grp + i * kGroups;
    v[i] = blk < nb ? __ldcg(reinterpret_cast<const float4*>(in + 32 * blk) + sub) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
#pragma unroll
  for (int i = 0; i < kMaxIter; ++i) ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
  ss = warp_sum(ss);
  if ((tid & 31) == 0) red[tid >> 5] = ss;
  consumers_sync();
  float tot = 0.f;
  for (int i = 0; i < kConsumers; ++i) tot += red[i];
  const float inv = rsqrtf(tot / cols + 1e-6f);
#pragma unroll
  for (int i = 0; i < kMaxIter; ++i) {
    const int blk = grp + i * kGroups;
    const float a0 = v[i].x * inv, a1 = v[i].y * inv, a2 = v[i].z * inv, a3 = v[i].w * inv;
    float amax = fmaxf(fmaxf(fabsf(a0), fabsf(a1)), fmaxf(fabsf(a2), fabsf(a3)));
    for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float d = amax / 127.f, id = d > 0.f ? 1.f / d : 0.f;
    const int q0 = __float2int_rn(a0 * id), q1 = __float2int_rn(a1 * id), q2 = __float2int_rn(a2 * id),
              q3 = __float2int_rn(a3 * id);
    int sum = q0 + q1 + q2 + q3;
    for (int o = 1; o < 8; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (blk < nb) {
      reinterpret_cast<uint32_t*>(xq + 32 * blk)[sub] =
          (q0 & 0xff) | (q1 & 0xff) << 8 | (q2 & 0xff) << 16 | static_cast<uint32_t>(q3 & 0xff) << 24;
      if (sub == 0) xd[blk] = d, xs[blk] = sum;
    }
  }
  consumers_sync();  // red and x are read below / reused by the next call
}

// Dot products of R Q4_0 rows (in shared memory or global, `stride` bytes apart) with x; lanes
// split the blocks, and the R rows share each block's x loads.
template <int R>
__device__ __forceinline__ void rows_dot(const uint8_t* row, int64_t stride, int cols, const int8_t* xq,
                                         const float* xd, const int* xs, int lane, float (&out)[R]) {
  const int nb = cols / 32;
  float acc[R];
#pragma unroll
  for (int i = 0; i < R; ++i) acc[i] = 0.f;
  for (int b = lane; b < nb; b += 32) {
    const int4 xl = reinterpret_cast<const int4*>(xq + 32 * b)[0];
    const int4 xh = reinterpret_cast<const int4*>(xq + 32 * b)[1];
    const float xdb = xd[b];
    const int xsb = xs[b];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const uint8_t* rw = row + i * stride;
      const uint4 w = reinterpret_cast<const uint4*>(rw + 2 * nb)[b];
      int dot = 0;
      dot = __dp4a(static_cast<int>(w.x & 0x0f0f0f0fu), xl.x, dot);
      dot = __dp4a(static_cast<int>(w.y & 0x0f0f0f0fu), xl.y, dot);
      dot = __dp4a(static_cast<int>(w.z & 0x0f0f0f0fu), xl.z, dot);
      dot = __dp4a(static_cast<int>(w.w & 0x0f0f0f0fu), xl.w, dot);
      dot = __dp4a(static_cast<int>((w.x >> 4) & 0x0f0f0f0fu), xh.x, dot);
      dot = __dp4a(static_cast<int>((w.y >> 4) & 0x0f0f0f0fu), xh.y, dot);
      dot = __dp4a(static_cast<int>((w.z >> 4) & 0x0f0f0f0fu), xh.z, dot);
      dot = __dp4a(static_cast<int>((w.w >> 4) & 0x0f0f0f0fu), xh.w, dot);
      acc[i] += __half2float(reinterpret_cast<const __half*>(rw)[b]) * xdb * static_cast<float>(dot - 8 * xsb);
    }
  }
#pragma unroll
  for (int i = 0; i < R; ++i) out[i] = warp_sum(acc[i]);
}

__global__ void __launch_bounds__(kThreads, 1) stream_chain(Step st) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* ring = smem;
  int8_t* xq = reinterpret_cast<int8_t*>(ring + kMaxSlots * kSlot);
  float* xd = reinterpret_cast<float*>(xq + kMaxCols);
  int* xs = reinterpret_cast<int*>(xd + kMaxCols / 32);
  float* red = reinterpret_cast<float*>(xs + kMaxCols / 32);
  float* yb = red + 32;  // producer_quant: this block's outputs of the current matrix
  uint64_t* full = reinterpret_cast<uint64_t*>(yb + kMaxBlockRows);
  uint64_t* empty = full + kMaxSlots;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, S = st.n_slots;
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; ++i) mbar_init(full + i, 1), mbar_init(empty + i, kTeam);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == kConsumers) {  // producer: every slice of the step, in order, as slots free up
    if (lane != 0) return;
    int64_t g = 0;
    for (int mi = 0; mi < st.n_mats; ++mi) {
      const Mat m = st.mats[mi];
      int r0, r1;
      slice(m, st.mode.producer_quant, r0, r1);
      for (int r = r0; r < r1; r += m.rows_per_slot, ++g) {
        const int slot = static_cast<int>(g % S);
        if (g >= S) mbar_wait(empty + slot, static_cast<unsigned>((g / S - 1) & 1));
        const unsigned bytes = static_cast<unsigned>(min(m.rows_per_slot, r1 - r) * m.rowbytes);
        mbar_expect_tx(full + slot, bytes);
        bulk_copy(ring + slot * kSlot, st.w + m.offset + static_cast<int64_t>(r) * m.rowbytes, bytes, full + slot);
      }
    }
    return;
  }

  // consumers
  const int tid = threadIdx.x;
  int64_t g0 = 0;  // the first chunk of the current matrix
  unsigned barriers = 0;
  for (int mi = 0; mi < st.n_mats; ++mi) {
    const Mat m = st.mats[mi];
    const Mode md = st.mode;
    const int in = md.input_from_y ? m.in : -1;
    if (md.barrier && m.in >= 0) {  // grid barrier: matrix `in` is complete everywhere
      consumers_sync();
      if (tid == 0) {
        ++barriers;
        __threadfence();
        atomicAdd(st.barrier, 1u);
        const unsigned target = barriers * gridDim.x;
        unsigned v;
        const long long t0 = clock64();
        do {
          if (clock64() - t0 > 2000000000LL) __trap();
          asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(st.barrier) : "memory");
        } while (v < target);
      }
      consumers_sync();
    }
    if (md.producer_quant && in >= 0) {
      // x from the input's Q8 blocks, every load issued at once (one L2 round trip); the RMS
      // factor from the blocks' sums of squares, reduced over the consumers
      const int64_t o = st.mats[in].y;
      const int nb = m.cols / 32;
      constexpr int kT = 32 * kConsumers, kPerB = (kMaxCols / 32 + kT - 1) / kT, kPerQ = (kMaxCols / 16 + kT - 1) / kT;
      float qd[kPerB], ss = 0.f;
      int qs[kPerB];
#pragma unroll
      for (int i = 0; i < kPerQ; ++i)
        if (tid + i * kT < m.cols / 16)
          reinterpret_cast<int4*>(xq)[tid + i * kT] = __ldcg(reinterpret_cast<const int4*>(st.qx + o) + tid + i * kT);
#pragma unroll
      for (int i = 0; i < kPerB; ++i) {
        const int b = tid + i * kT;
        qd[i] = b < nb ? __ldcg(st.qd + o / 32 + b) : 0.f;
        qs[i] = b < nb ? __ldcg(st.qs + o / 32 + b) : 0;
        ss += b < nb ? __ldcg(st.qss + o / 32 + b) : 0.f;
      }
      ss = warp_sum(ss);
      if (lane == 0) red[warp] = ss;
      consumers_sync();
      float tot = 0.f;
      for (int i = 0; i < kConsumers; ++i) tot += red[i];
      const float inv = rsqrtf(tot / m.cols + 1e-6f);
#pragma unroll
      for (int i = 0; i < kPerB; ++i)
        if (tid + i * kT < nb) xd[tid + i * kT] = qd[i] * inv, xs[tid + i * kT] = qs[i];
      consumers_sync();
    } else if (md.norm_each || mi == 0) {
      norm_quant(in >= 0 ? st.y + st.mats[in].y : st.x0, md.norm_each || md.producer_quant ? m.cols : kMaxCols, xq,
                 xd, xs, red, tid);
    }
    int r0, r1;
    slice(m, md.producer_quant, r0, r1);
    const int n = (r1 - r0 + m.rows_per_slot - 1) / m.rows_per_slot;
    // chunk g of the step belongs to team g % kTeams, which has the slots s = g % S (S a
    // multiple of kTeams): a warp meets only its team's slots, every one of them, in order, so
    // a slot's mbarrier parity never aliases a use two phases back.
    const int team = warp / kTeam, mate = warp % kTeam;
    for (int j = static_cast<int>((team - g0 % kTeams + kTeams) % kTeams); j < n; j += kTeams) {
      const int64_t g = g0 + j;
      const int slot = static_cast<int>(g % S);
      mbar_wait(full + slot, static_cast<unsigned>((g / S) & 1));
      const int rb = r0 + j * m.rows_per_slot, re = min(r1, rb + m.rows_per_slot);
      const auto store = [&](int r, float v) {
        if (lane == 0) st.y[m.y + r] = v;
        if (lane == 0 && md.producer_quant) yb[r - r0] = v;
      };
      for (int r = rb + mate; r < re && md.compute; r += kPair * kTeam) {
        if (md.compute == 2 && ((r - rb) / (kPair * kTeam) & 1)) continue;
        const uint8_t* p = ring + slot * kSlot + (r - rb) * m.rowbytes;
        if (kPair == 2 && r + kTeam < re) {  // two rows at once: their loads and sums overlap
          float v[2];
          rows_dot<2>(p, static_cast<int64_t>(kTeam) * m.rowbytes, m.cols, xq, xd, xs, lane, v);
          store(r, v[0]), store(r + kTeam, v[1]);
        } else {
          float v[1];
          rows_dot<1>(p, 0, m.cols, xq, xd, xs, lane, v);
          store(r, v[0]);
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(empty + slot);
    }
    g0 += n;
    if (md.producer_quant) {  // this block's 32-row groups of the output as Q8 blocks
      consumers_sync();
      for (int gi = warp; gi < (r1 - r0) / 32; gi += kConsumers) {
        const float v = yb[32 * gi + lane];
        float amax = fabsf(v);
        for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        const float d = amax / 127.f, id = d > 0.f ? 1.f / d : 0.f;
        const int q = __float2int_rn(v * id);
        int sum = q;
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        const float ss = warp_sum(v * v);
        const int64_t row = m.y + r0 + 32 * gi;
        st.qx[row + lane] = static_cast<int8_t>(q);
        if (lane == 0) st.qd[row / 32] = d, st.qs[row / 32] = sum, st.qss[row / 32] = ss;
      }
    }
  }
}

// --- reference: the same x (norm_quant with 256 threads), then one warp a row from global ---
__global__ void ref_quant(const float* in, int cols, int8_t* xq, float* xd, int* xs) {
  __shared__ int8_t q[kMaxCols];
  __shared__ float d[kMaxCols / 32], red[32];
  if (blockDim.x != 32 * kConsumers) __trap();
  __shared__ int s[kMaxCols / 32];
  norm_quant(in, cols, q, d, s, red, threadIdx.x);
  for (int i = threadIdx.x; i < cols; i += blockDim.x) xq[i] = q[i];
  for (int i = threadIdx.x; i < cols / 32; i += blockDim.x) xd[i] = d[i], xs[i] = s[i];
}
// x from a matrix's Q8 blocks (producer_quant), the RMS factor summed in block order
__global__ void ref_from_q8(const int8_t* qx, const float* qd, const int* qs, const float* qss, int64_t o, int cols,
                            int8_t* xq, float* xd, int* xs) {
  __shared__ float inv;
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int b = 0; b < cols / 32; ++b) t += qss[o / 32 + b];
    inv = rsqrtf(t / cols + 1e-6f);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < cols; i += blockDim.x) xq[i] = qx[o + i];
  for (int b = threadIdx.x; b < cols / 32; b += blockDim.x) xd[b] = qd[o / 32 + b] * inv, xs[b] = qs[o / 32 + b];
}
__global__ void ref_gemv(const uint8_t* w, Mat m, const int8_t* xq, const float* xd, const int* xs, float* y) {
  const int row = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (row >= m.rows) return;
  float v[1];
  rows_dot<1>(w + m.offset + static_cast<int64_t>(row) * m.rowbytes, 0, m.cols, xq, xd, xs, threadIdx.x & 31, v);
  if ((threadIdx.x & 31) == 0) y[row] = v[0];
}

// Random weights: bytes from a hash, then each row's scales set to small fp16 values.
__global__ void fill_bytes(uint32_t* w, int64_t n_words, uint32_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n_words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed ^ static_cast<uint32_t>(i >> 32) * 40503u;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    w[i] = h;
  }
}
__global__ void fill_scales(uint8_t* w, Mat m) {
  const int nb = m.cols / 32;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < static_cast<int64_t>(m.rows) * nb;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / nb, b = i % nb;
    __half* sc = reinterpret_cast<__half*>(w + m.offset + r * m.rowbytes);
    sc[b] = __float2half(0.002f + 0.00001f * static_cast<float>((r * 131 + b * 7) % 1000));
  }
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int dev = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int layers = argc > 1 ? std::atoi(argv[1]) : 32;
  // llama-3.1-8b with brisk synth's 32,000-token vocabulary
  const int D = 4096, QKV = 6144, FF = 14336, V = 32000;
  std::vector<Mat> mats;
  int64_t off = 0, yoff = 0;
  auto add = [&](int rows, int cols) {
    Mat m{};
    m.offset = off, m.rows = rows, m.cols = cols, m.rowbytes = cols / 32 * 2 + cols / 2;
    m.rows_per_slot = kSlot / m.rowbytes, m.in = static_cast<int>(mats.size()) - 1, m.y = yoff;
    off += static_cast<int64_t>(rows) * m.rowbytes, yoff += rows;
    mats.push_back(m);
  };
  for (int l = 0; l < layers; ++l) add(QKV, D), add(D, D), add(2 * FF, D), add(D, FF);
  add(V, D);
  const int64_t weight_bytes = off;
  std::printf("SMs %d, %d layers + head: %zu matrices, %.3f GB of Q4_0 weights\n", sms, layers, mats.size(),
              weight_bytes / 1e9);

  uint8_t* w;
  float *y, *x0, *yref;
  Mat* dmats;
  unsigned* bar;
  int8_t* rq;
  float* rd;
  int* rs;
  int8_t* qx;
  float *qd, *qss;
  int* qs;
  CHECK(cudaMalloc(&qx, yoff));
  CHECK(cudaMalloc(&qd, yoff / 32 * sizeof(float)));
  CHECK(cudaMalloc(&qss, yoff / 32 * sizeof(float)));
  CHECK(cudaMalloc(&qs, yoff / 32 * sizeof(int)));
  CHECK(cudaMalloc(&w, weight_bytes));
  CHECK(cudaMalloc(&y, yoff * sizeof(float)));
  CHECK(cudaMalloc(&yref, V * sizeof(float) * 2));
  CHECK(cudaMalloc(&x0, kMaxCols * sizeof(float)));  // the independent variant reads up to kMaxCols
  CHECK(cudaMalloc(&dmats, mats.size() * sizeof(Mat)));
  CHECK(cudaMalloc(&bar, sizeof(unsigned)));
  CHECK(cudaMalloc(&rq, kMaxCols));
  CHECK(cudaMalloc(&rd, kMaxCols / 32 * sizeof(float)));
  CHECK(cudaMalloc(&rs, kMaxCols / 32 * sizeof(int)));
  CHECK(cudaMemcpy(dmats, mats.data(), mats.size() * sizeof(Mat), cudaMemcpyHostToDevice));
  fill_bytes<<<4 * sms, 1024>>>(reinterpret_cast<uint32_t*>(w), weight_bytes / 4, 12345u);
  for (const Mat& m : mats) fill_scales<<<2 * sms, 256>>>(w, m);
  std::vector<float> hx(kMaxCols);
  for (int i = 0; i < kMaxCols; ++i) hx[i] = std::sin(0.37f * i) + 0.1f * (i % 7);
  CHECK(cudaMemcpy(x0, hx.data(), kMaxCols * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaDeviceSynchronize());

  const size_t smem =
      kMaxSlots * kSlot + kMaxCols + 2 * (kMaxCols / 32) * 4 + 32 * 4 + kMaxBlockRows * 4 + 2 * kMaxSlots * 8;
  CHECK(cudaFuncSetAttribute(stream_chain, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));

  // device-to-device copy bandwidth, as bench_gpu measures it (1 GB, read + write)
  double copy_gbs = 0;
  {
    const size_t n = size_t(1) << 30;
    uint8_t *a, *b;
    CHECK(cudaMalloc(&a, n));
    CHECK(cudaMalloc(&b, n));
    std::vector<float> t;
    for (int i = 0; i < 10; ++i) {
      CHECK(cudaEventRecord(e0));
      CHECK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice));
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    copy_gbs = 2.0 * n / (t[t.size() / 2] * 1e-3) / 1e9;
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }
  std::printf("device-to-device copy: %.0f GB/s\n\n", copy_gbs);

  auto run = [&](int slots, int mode, int reps) {
    Step st{w, dmats, static_cast<int>(mats.size()), x0, y, bar, qx, qd, qs, qss, slots, kModes[mode]};
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
      CHECK(cudaMemsetAsync(bar, 0, sizeof(unsigned)));
      CHECK(cudaEventRecord(e0));
      stream_chain<<<sms, kThreads, smem>>>(st);
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      CHECK(cudaGetLastError());
      float ms;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };

  // correctness of both chains (modes 0 and 8): every matrix against the reference from the
  // same input; for mode 8 also its Q8 codes against the host's from the float outputs
  std::vector<float> got(V), want(V);
  for (int mode : {0, 8}) {
    run(kMaxSlots / kTeams * kTeams, mode, 1);
    double worst = 0;
    int64_t code_diffs = 0;
    for (size_t i = 0; i < mats.size(); ++i) {
      const Mat& m = mats[i];
      if (m.in < 0)
        ref_quant<<<1, 32 * kConsumers>>>(x0, m.cols, rq, rd, rs);
      else if (mode == 0)
        ref_quant<<<1, 32 * kConsumers>>>(y + mats[m.in].y, m.cols, rq, rd, rs);
      else
        ref_from_q8<<<1, 256>>>(qx, qd, qs, qss, mats[m.in].y, m.cols, rq, rd, rs);
      ref_gemv<<<(m.rows + 7) / 8, 256>>>(w, m, rq, rd, rs, yref);
      CHECK(cudaMemcpy(want.data(), yref, m.rows * sizeof(float), cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(got.data(), y + m.y, m.rows * sizeof(float), cudaMemcpyDeviceToHost));
      double amax = 0, dmax = 0;
      for (int r = 0; r < m.rows; ++r)
        amax = std::max(amax, std::fabs(double(want[r]))), dmax = std::max(dmax, std::fabs(double(got[r]) - want[r]));
      worst = std::max(worst, dmax / amax);
      if (!(dmax <= 1e-4 * amax)) {
        std::printf("MISMATCH mode %d matrix %zu (%d x %d): max |diff| %g, max |y| %g\n", mode, i, m.rows, m.cols, dmax,
                    amax);
        return 1;
      }
      if (mode == 8) {
        std::vector<int8_t> q(m.rows);
        CHECK(cudaMemcpy(q.data(), qx + m.y, m.rows, cudaMemcpyDeviceToHost));
        for (int g = 0; g < m.rows / 32; ++g) {
          float gmax = 0.f;
          for (int j = 0; j < 32; ++j) gmax = std::max(gmax, std::fabs(got[32 * g + j]));
          const float d = gmax / 127.f, id = d > 0.f ? 1.f / d : 0.f;
          for (int j = 0; j < 32; ++j) code_diffs += static_cast<int>(std::nearbyint(got[32 * g + j] * id)) != q[32 * g + j];
        }
      }
    }
    std::printf("check mode %d: all %zu matrices match the reference (worst max|diff|/max|y| %.2e)", mode, mats.size(),
                worst);
    if (mode == 8) std::printf(", Q8 codes differing from the host's: %lld", static_cast<long long>(code_diffs));
    std::printf("\n");
    if (code_diffs) return 1;
  }
  std::printf("\n");

  std::printf("consumer warps %d in teams of %d, %d row(s) at once, slot %d bytes\n", kConsumers, kTeam, kPair, kSlot);
  std::printf("| mode | slots | us a step | GB/s | %% of copy |\n|---|---:|---:|---:|---:|\n");
  for (int mode = 0; mode < kNumModes; ++mode)
    for (int slots : {kMaxSlots / kTeams * kTeams}) {
      run(slots, mode, 3);  // warm-up
      const float ms = run(slots, mode, 21);
      const double gbs = weight_bytes / (ms * 1e-3) / 1e9;
      std::printf("| %s | %d | %.1f | %.0f | %.1f |\n", kModes[mode].name, slots, ms * 1e3, gbs, 100.0 * gbs / copy_gbs);
    }
  return 0;
}
