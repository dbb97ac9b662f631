// Causal prefill attention on tensor cores over the f16 KV cache, FlashAttention-2 style
// (Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work
// Partitioning", arXiv 2307.08691): S = Q K^T and O += P V never leave the chip.
//
// One block of 4 warps per (query head, tile of 64 queries); each warp owns 16 query rows.
// The Q tile is loaded once (cp.async, then ldmatrix into registers, kept for the whole
// run); K and V tiles of 64 positions stream through shared memory, two stages deep
// (cp.async: the next tile's copy overlaps this tile's arithmetic). Per tile and warp:
//   S (16 x 64, f32)  = Q K^T         mma.sync m16n8k16, f16 in, f32 accumulation
//   online softmax in registers (exp2 domain; the row max and sum over the 4 lanes of a quad)
//   O (16 x D, f32)  += P V           P re-packed from the S accumulators to f16 A fragments
//                                     (the accumulator and A layouts agree: no shared memory)
// GQA: the KV head is h / G; the G blocks of one KV head are neighbours in the grid, so the
// tiles they read are shared through L2. The causal mask is applied only on the tiles that
// reach past the tile's first query (p0 + q0); positions past the last query are zero-filled
// by cp.async (never read), so nothing beyond the written cache enters (0 * garbage = NaN).
// Query tiles are launched longest first (tile order reversed) to shorten the tail.
//
// Shared memory rows are D halfs (D/8 chunks of 16 bytes); chunk c of row r sits at
// c ^ (r & 7), so the 8 rows an ldmatrix phase reads fall in 8 different bank groups.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "util/error.h"

namespace brisk::cuda {

namespace {

constexpr int kRows = 64;     // queries a block, and positions a K/V tile
constexpr int kThreads = 128;  // 4 warps x 16 query rows

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared; with !valid the 16 bytes are zero-filled and nothing is read.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_prev() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// c (16 x 8, f32) += a (16 x 16, f16, row) * b (16 x 8, f16, col)
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ float fast_exp2(float x) {  // 2^x; 2^-inf = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Byte offset of chunk c (8 halfs) of row r in a swizzled tile of D-half rows.
template <int D>
__device__ __forceinline__ uint32_t tile_off(int r, int c) {
  return static_cast<uint32_t>(r * D * 2 + ((c ^ (r & 7)) << 4));
}

// Rows [0, kRows) of a tile from g (row stride ld halfs); rows >= n_valid are zero-filled.
template <int D>
__device__ __forceinline__ void load_tile(uint32_t dst, const uint16_t* g, int64_t ld, int n_valid) {
  constexpr int CH = D / 8;
#pragma unroll
  for (int it = 0; it < kRows * CH / kThreads; ++it) {
    const int i = it * kThreads + static_cast<int>(threadIdx.x), r = i / CH, c = i % CH;
    const bool ok = r < n_valid;
    cp_async16(dst + tile_off<D>(r, c), g + (ok ? r : 0) * ld + c * 8, ok);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads, 2)
flash_prefill_kernel(const uint16_t* q16, int n, int p0, int seq, AttnDims d, const uint16_t* kc, const uint16_t* vc,
                     float scale_log2, float* out, int64_t ldo) {
  pdl_launch_dependents();
  constexpr int TILE = kRows * D * 2;  // bytes
  constexpr int KS = D / 16;           // k-steps of S = Q K^T
  constexpr int DT = D / 8;            // n-tiles of O
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t sQ = smem_addr(smem), sK = sQ + TILE, sV = sK + 2 * TILE;

  const int h = blockIdx.x, qt = gridDim.y - 1 - blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int G = d.n_head / d.n_head_kv, QD = d.n_head * D;
  const int q0 = qt * kRows, q_rows = min(kRows, n - q0);
  const int n_keys = p0 + q0 + q_rows;  // the last query of the tile sees positions < n_keys
  const int n_tiles = (n_keys + kRows - 1) / kRows;
  const int64_t kv_base = (static_cast<int64_t>(seq) * d.n_head_kv + h / G) * d.n_ctx * D;
  const uint16_t* kg = kc + kv_base;
  const uint16_t* vg = vc + kv_base;

  pdl_wait();
  load_tile<D>(sQ, q16 + static_cast<int64_t>(q0) * QD + h * D, QD, q_rows);
  load_tile<D>(sK, kg, D, n_keys);
  load_tile<D>(sV, vg, D, n_keys);
  cp_async_commit();

  uint32_t qf[KS][4];
  float o[DT][4];
#pragma unroll
  for (int j = 0; j < DT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  // this lane's two rows of the warp's 16 (accumulator layout): r and r + 8
  const int row0 = warp * 16 + (lane >> 2);
  const int last0 = p0 + q0 + row0;  // the last position row0 sees (row0 + 8: last0 + 8)

  for (int kt = 0; kt < n_tiles; ++kt) {
    const uint32_t bK = sK + (kt & 1) * TILE, bV = sV + (kt & 1) * TILE;
    if (kt + 1 < n_tiles) {
      const int64_t off = static_cast<int64_t>(kt + 1) * kRows * D;
      load_tile<D>(sK + ((kt + 1) & 1) * TILE, kg + off, D, n_keys - (kt + 1) * kRows);
      load_tile<D>(sV + ((kt + 1) & 1) * TILE, vg + off, D, n_keys - (kt + 1) * kRows);
    }
    cp_async_commit();  // (empty on the last tile: the wait below counts groups)
    cp_async_wait_prev();
    __syncthreads();
    if (kt == 0) {
#pragma unroll
      for (int ks = 0; ks < KS; ++ks)
        ldmatrix_x4(qf[ks], sQ + tile_off<D>(warp * 16 + (lane & 15), 2 * ks + (lane >> 4)));
    }

    // S = Q K^T: 8 n-tiles of 8 positions
    float s[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
#pragma unroll
      for (int nn = 0; nn < 4; ++nn) {
        uint32_t b[4];
        const int key = nn * 16 + (lane & 7) + ((lane >> 4) << 3);
        ldmatrix_x4(b, bK + tile_off<D>(key, 2 * ks + ((lane >> 3) & 1)));
        mma_16816(s[2 * nn], qf[ks], b[0], b[1]);
        mma_16816(s[2 * nn + 1], qf[ks], b[2], b[3]);
      }
    }
    const int k0 = kt * kRows;
    const bool masked = k0 + kRows - 1 > p0 + q0;  // some position past the tile's first query
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[j][e] * scale_log2;
        if (masked && k0 + j * 8 + 2 * (lane & 3) + (e & 1) > last0 + (e >> 1) * 8) x = -INFINITY;
        s[j][e] = x;
      }

    // online softmax, rows i = 0 (row0) and 1 (row0 + 8)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float mx = m[i];
#pragma unroll
      for (int j = 0; j < 8; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * i], s[j][2 * i + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float ref = mx == -INFINITY ? 0.f : mx;  // a row with nothing visible yet
      const float corr = fast_exp2(m[i] - ref);
      m[i] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        s[j][2 * i] = fast_exp2(s[j][2 * i] - ref);
        s[j][2 * i + 1] = fast_exp2(s[j][2 * i + 1] - ref);
        sum += s[j][2 * i] + s[j][2 * i + 1];
      }
      l[i] = l[i] * corr + sum;  // this lane's share; the quad's shares are summed at the end
#pragma unroll
      for (int j = 0; j < DT; ++j) o[j][2 * i] *= corr, o[j][2 * i + 1] *= corr;
    }

    // O += P V: 4 k-steps of 16 positions, P from the S accumulators
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint32_t a[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                             pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, bV + tile_off<D>(key, 2 * dn + (lane >> 4)));
        mma_16816(o[2 * dn], a, b[0], b[1]);
        mma_16816(o[2 * dn + 1], a, b[2], b[3]);
      }
    }
    __syncthreads();  // this stage is refilled by the next iteration's copy
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float sum = l[i];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = 1.f / sum;
    const int r = q0 + row0 + 8 * i;
    if (r < n) {
      float* dst = out + static_cast<int64_t>(r) * ldo + h * D + 2 * (lane & 3);
#pragma unroll
      for (int j = 0; j < DT; ++j)
        *reinterpret_cast<float2*>(dst + j * 8) = make_float2(o[j][2 * i] * inv, o[j][2 * i + 1] * inv);
    }
  }
}

template <int D>
void launch_prefill(const uint16_t* q16, int n, int p0, int seq, const AttnDims& d, const LayerKv& kv, float scale,
                    float* out, int64_t ldo, cudaStream_t s) {
  constexpr int smem = 5 * kRows * D * 2;  // Q + two stages of K and V
  static const bool attr_set = [] {
    check(cudaFuncSetAttribute(flash_prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
          "cudaFuncSetAttribute(flash_prefill)");
    return true;
  }();
  (void)attr_set;
  const dim3 grid(static_cast<unsigned>(d.n_head), static_cast<unsigned>((n + kRows - 1) / kRows));
  launch("attention_prefill", flash_prefill_kernel<D>, grid, dim3(kThreads), smem, s, q16, n, p0, seq, d,
         reinterpret_cast<const uint16_t*>(kv.k), reinterpret_cast<const uint16_t*>(kv.v),
         scale * 1.44269504088896341f, out, ldo);
}

}  // namespace

bool prefill_attention_supported(int head_dim) { return head_dim == 64 || head_dim == 128; }

void attention_prefill(const uint16_t* q16, int n, int p0, int seq, const AttnDims& d, LayerKv kv, float scale,
                       float* out, int64_t ldo, cudaStream_t s) {
  if (n <= 0) return;
  if (kv.type != KvType::f16 && kv.type != KvType::f32)
    fail("CUDA attention: the tensor-core prefill reads an f16 cache (this one is {}); use attention_decode",
         kv_type_name(kv.type));
  if (!prefill_attention_supported(d.head_dim))
    fail("CUDA attention: the tensor-core prefill supports head_dim 64 and 128 (got {}); use attention_decode",
         d.head_dim);
  if (d.n_head_kv <= 0 || d.n_head % d.n_head_kv)
    fail("CUDA attention: {} query heads over {} KV heads", d.n_head, d.n_head_kv);
  if (p0 < 0 || p0 + n > d.n_ctx)
    fail("CUDA attention: prefill of positions {}..{} outside the cache's {}", p0, p0 + n - 1, d.n_ctx);
  if (ldo % 2) fail("CUDA attention: prefill output stride {} must be even", ldo);
  if (d.head_dim == 64) launch_prefill<64>(q16, n, p0, seq, d, kv, scale, out, ldo, s);
  else launch_prefill<128>(q16, n, p0, seq, d, kv, scale, out, ldo, s);
}

}  // namespace brisk::cuda
