// Experiment for issue 5 (batch-1 decode at >= 85% of copy bandwidth): how fast can the
// 8B Q4_0 decode step's matrices be streamed when one persistent kernel walks them all, with a
// grid-wide barrier wherever a matrix needs the previous one's output?
//
// Each SM runs one block: a producer warp streams the SM's slice of every matrix of the step,
// in order, into a ring of shared-memory slots with bulk copies (cp.async.bulk + mbarrier),
// regardless of matrix boundaries; eight consumer warps wait at a grid barrier for the previous
// matrix's output, normalize and quantize it (as RMSNorm + Q8 activation quantization would),
// then take the slots as they fill. DRAM keeps streaming the next matrix's weights while the
// consumers sit at a barrier, which separate kernels cannot do (bench/gpu/NOTES.md, sessions
// 6-21). Standalone, not part of the engine: random weights of the real shapes, checked
// against a plain kernel per matrix.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a bench/gpu/stream_chain.cu -o /tmp/stream_chain
//   /tmp/stream_chain            (prints a table: variant, us a step, GB/s, % of D2D copy)
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
#define SLOT 8192
#endif
#ifndef ROWWISE
#define ROWWISE 0  // 1: every warp visits every chunk and takes rows r % kConsumers of the slice
#endif
#ifndef PRODUCERS
#define PRODUCERS 1
#endif
constexpr int kSlot = SLOT;            // bytes of one ring slot (whole rows of one matrix)
constexpr int kProducers = PRODUCERS;  // lanes of the producer warp issuing copies (chunk g: lane g % kProducers)
#ifndef CONSUMERS
#define CONSUMERS 8
#endif
#ifndef ROW_UNROLL
#define ROW_UNROLL 1
#endif
constexpr int kConsumers = CONSUMERS;  // consumer warps a block; the last warp is the producer
constexpr int kRowUnroll = ROW_UNROLL;
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
};
constexpr Mode kModes[] = {
    {"0 barrier + norm each matrix (the chain)", true, true, true, 1},
    {"1 norm of x0 each matrix, no barrier", false, true, false, 1},
    {"2 x once", false, false, false, 1},
    {"3 no compute", false, false, false, 0},
    {"4 barrier, x once", true, false, false, 1},
    {"5 as 0, half the rows computed", true, true, true, 2},
    {"6 barrier, no compute", true, false, false, 0},
    {"7 barrier + norm each matrix, no compute", true, true, true, 0},
};
constexpr int kNumModes = sizeof(kModes) / sizeof(kModes[0]);

struct Step {
  const uint8_t* w;
  const Mat* mats;
  int n_mats;
  const float* x0;
  float* y;
  unsigned* barrier;  // zeroed before each launch
  int n_slots;        // ring depth: <= kMaxSlots, a multiple of kConsumers
  Mode mode;
};
constexpr int kMaxSlots = 196608 / kSlot;

static_assert(kMaxSlots >= kConsumers, "the ring needs a slot for every consumer warp");

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
__device__ __forceinline__ void slice(const Mat& m, int& r0, int& r1) {
  r0 = static_cast<int>(static_cast<int64_t>(m.rows) * blockIdx.x / gridDim.x);
  r1 = static_cast<int>(static_cast<int64_t>(m.rows) * (blockIdx.x + 1) / gridDim.x);
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

// Row dot product of one Q4_0 row (in shared memory or global) with x; lanes split the blocks.
__device__ __forceinline__ float row_dot(const uint8_t* row, int cols, const int8_t* xq, const float* xd,
                                         const int* xs, int lane) {
  const int nb = cols / 32;
  const __half* sc = reinterpret_cast<const __half*>(row);
  const uint4* qs = reinterpret_cast<const uint4*>(row + 2 * nb);
  float acc = 0.f;
#pragma unroll kRowUnroll
  for (int b = lane; b < nb; b += 32) {
    const uint4 w = qs[b];
    const int4 xl = reinterpret_cast<const int4*>(xq + 32 * b)[0];
    const int4 xh = reinterpret_cast<const int4*>(xq + 32 * b)[1];
    int dot = 0;
    dot = __dp4a(static_cast<int>(w.x & 0x0f0f0f0fu), xl.x, dot);
    dot = __dp4a(static_cast<int>(w.y & 0x0f0f0f0fu), xl.y, dot);
    dot = __dp4a(static_cast<int>(w.z & 0x0f0f0f0fu), xl.z, dot);
    dot = __dp4a(static_cast<int>(w.w & 0x0f0f0f0fu), xl.w, dot);
    dot = __dp4a(static_cast<int>((w.x >> 4) & 0x0f0f0f0fu), xh.x, dot);
    dot = __dp4a(static_cast<int>((w.y >> 4) & 0x0f0f0f0fu), xh.y, dot);
    dot = __dp4a(static_cast<int>((w.z >> 4) & 0x0f0f0f0fu), xh.z, dot);
    dot = __dp4a(static_cast<int>((w.w >> 4) & 0x0f0f0f0fu), xh.w, dot);
    acc += __half2float(sc[b]) * xd[b] * static_cast<float>(dot - 8 * xs[b]);
  }
  return warp_sum(acc);
}

__global__ void __launch_bounds__(kThreads, 1) stream_chain(Step st) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint8_t* ring = smem;
  int8_t* xq = reinterpret_cast<int8_t*>(ring + kMaxSlots * kSlot);
  float* xd = reinterpret_cast<float*>(xq + kMaxCols);
  int* xs = reinterpret_cast<int*>(xd + kMaxCols / 32);
  float* red = reinterpret_cast<float*>(xs + kMaxCols / 32);
  uint64_t* full = reinterpret_cast<uint64_t*>(red + 32);
  uint64_t* empty = full + kMaxSlots;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, S = st.n_slots;
  if (threadIdx.x == 0) {
    for (int i = 0; i < S; ++i) mbar_init(full + i, 1), mbar_init(empty + i, ROWWISE ? kConsumers : 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warp == kConsumers) {  // producer: every slice of the step, in order, as slots free up
    if (lane >= kProducers) return;
    int64_t g = 0;
    for (int mi = 0; mi < st.n_mats; ++mi) {
      const Mat m = st.mats[mi];
      int r0, r1;
      slice(m, r0, r1);
      for (int r = r0; r < r1; r += m.rows_per_slot, ++g) {
        if (g % kProducers != lane) continue;
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
    if (md.norm_each || mi == 0)
      norm_quant(in >= 0 ? st.y + st.mats[in].y : st.x0, md.norm_each ? m.cols : kMaxCols, xq, xd, xs, red, tid);
    int r0, r1;
    slice(m, r0, r1);
    const int n = (r1 - r0 + m.rows_per_slot - 1) / m.rows_per_slot;
    if (ROWWISE) {
      // every warp visits every chunk in order (so no parity aliasing, whatever S) and takes
      // the rows r0 + warp + k kConsumers: a matrix's last chunk is spread over the warps
      for (int j = 0; j < n; ++j) {
        const int64_t g = g0 + j;
        const int slot = static_cast<int>(g % S);
        mbar_wait(full + slot, static_cast<unsigned>((g / S) & 1));
        const int rb = r0 + j * m.rows_per_slot, re = min(r1, rb + m.rows_per_slot);
        int r = rb + ((warp - (rb - r0)) % kConsumers + kConsumers) % kConsumers;
        for (; r < re && md.compute; r += kConsumers) {
          if (md.compute == 2 && ((r / kConsumers) & 1)) continue;
          const float v = row_dot(ring + slot * kSlot + (r - rb) * m.rowbytes, m.cols, xq, xd, xs, lane);
          if (lane == 0) st.y[m.y + r] = v;
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(empty + slot);
      }
      g0 += n;
      continue;
    }
    // chunk g of the step belongs to warp g % kConsumers, which has the slots s = g % S
    // (S a multiple of kConsumers): a warp meets only its own slots, in order, so a slot's
    // mbarrier parity never aliases a use two phases back.
    for (int j = static_cast<int>((warp - g0 % kConsumers + kConsumers) % kConsumers); j < n; j += kConsumers) {
      const int64_t g = g0 + j;
      const int slot = static_cast<int>(g % S);
      mbar_wait(full + slot, static_cast<unsigned>((g / S) & 1));
      const int rb = r0 + j * m.rows_per_slot, re = min(r1, rb + m.rows_per_slot);
      for (int r = rb; r < re && md.compute; ++r) {
        if (md.compute == 2 && (r & 1)) continue;
        const float v = row_dot(ring + slot * kSlot + (r - rb) * m.rowbytes, m.cols, xq, xd, xs, lane);
        if (lane == 0) st.y[m.y + r] = v;
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(empty + slot);
    }
    g0 += n;
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
__global__ void ref_gemv(const uint8_t* w, Mat m, const int8_t* xq, const float* xd, const int* xs, float* y) {
  const int row = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (row >= m.rows) return;
  const float v = row_dot(w + m.offset + static_cast<int64_t>(row) * m.rowbytes, m.cols, xq, xd, xs, threadIdx.x & 31);
  if ((threadIdx.x & 31) == 0) y[row] = v;
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

  const size_t smem = kMaxSlots * kSlot + kMaxCols + 2 * (kMaxCols / 32) * 4 + 32 * 4 + 2 * kMaxSlots * 8;
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
    Step st{w, dmats, static_cast<int>(mats.size()), x0, y, bar, slots, kModes[mode]};
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

  // correctness of the dependent chain: every matrix against the reference from the same input
  run(ROWWISE ? kMaxSlots : kMaxSlots / kConsumers * kConsumers, 0, 1);
  std::vector<float> got(V), want(V);
  double worst = 0;
  for (size_t i = 0; i < mats.size(); ++i) {
    const Mat& m = mats[i];
    ref_quant<<<1, 32 * kConsumers>>>(m.in >= 0 ? y + mats[m.in].y : x0, m.cols, rq, rd, rs);
    ref_gemv<<<(m.rows + 7) / 8, 256>>>(w, m, rq, rd, rs, yref);
    CHECK(cudaMemcpy(want.data(), yref, m.rows * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(got.data(), y + m.y, m.rows * sizeof(float), cudaMemcpyDeviceToHost));
    double amax = 0, dmax = 0;
    for (int r = 0; r < m.rows; ++r)
      amax = std::max(amax, std::fabs(double(want[r]))), dmax = std::max(dmax, std::fabs(double(got[r]) - want[r]));
    worst = std::max(worst, dmax / amax);
    if (!(dmax <= 1e-4 * amax)) {
      std::printf("MISMATCH matrix %zu (%d x %d): max |diff| %g, max |y| %g\n", i, m.rows, m.cols, dmax, amax);
      return 1;
    }
  }
  std::printf("check: all %zu matrices match the reference (worst max|diff|/max|y| %.2e)\n\n", mats.size(), worst);

  std::printf("consumer warps %d, row loop unroll %d, slot %d bytes, %d producer lanes, rowwise %d\n", kConsumers,
              ROW_UNROLL, kSlot, kProducers, ROWWISE);
  std::printf("| mode | slots | us a step | GB/s | %% of copy |\n|---|---:|---:|---:|---:|\n");
  for (int mode = 0; mode < kNumModes; ++mode)
    for (int slots : {ROWWISE ? kMaxSlots : kMaxSlots / kConsumers * kConsumers}) {
      run(slots, mode, 3);  // warm-up
      const float ms = run(slots, mode, 21);
      const double gbs = weight_bytes / (ms * 1e-3) / 1e9;
      std::printf("| %s | %d | %.1f | %.0f | %.1f |\n", kModes[mode].name, slots, ms * 1e3, gbs, 100.0 * gbs / copy_gbs);
    }
  return 0;
}
