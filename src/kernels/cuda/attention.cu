// q/k/v post-processing (bias, q/k norm, RoPE, KV store through the cache's codec) and
// attention over the KV cache: split-K flash decoding (any codec, dequantized in registers)
// for short query runs and for every run over a compressed cache (attention_prefill.cu has
// the tensor-core prefill over an f16 cache).
#include <algorithm>
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/kv_codec.cuh"
#include "util/error.h"

namespace brisk::cuda {

// Block (t, head) with head_dim threads; heads [0, n_head) are q, [n_head, n_head + n_kv) k
// (whose block also stores v). A rotated codec (int4r, nsn2) rotates q, k and v here, once
// (kv_format.h: attention then works in the rotated basis and un-rotates its output).
// qkv is not __restrict__: its loads must stay after pdl_wait (a restrict-const pointer's
// loads become ld.global.nc, which the scheduler may lift above griddepcontrol.wait once
// other loads precede the wait; seen as wrong decode steps under graph replay).
__global__ void qkv_post_kernel(const float* qkv, AttnDims d, const float* bq, const float* bk,
                                const float* bv, const float* q_norm, const float* k_norm,
                                const float* __restrict__ inv_freq, const int32_t* __restrict__ pos,
                                const int32_t* __restrict__ seq, float* __restrict__ q_out, uint16_t* q16,
                                LayerKv kv) {
  pdl_launch_dependents();
  __shared__ float buf[256];
  __shared__ Nsn2Scratch nsh;
  const int t = blockIdx.x, hh = blockIdx.y, i = threadIdx.x, D = d.head_dim;
  const int QD = d.n_head * D, KD = d.n_head_kv * D;
  const bool is_q = hh < d.n_head;
  const int h = is_q ? hh : hh - d.n_head;
  // What no kernel writes (biases, norm weights, RoPE frequencies) is read before pdl_wait.
  const int half = D / 2;
  int fi, partner;
  bool first;
  if (d.neox) {
    fi = i % half;
    first = i < half;
    partner = first ? i + half : i - half;
  } else {
    fi = i / 2;
    first = (i & 1) == 0;
    partner = first ? i + 1 : i - 1;
  }
  const float* bias = is_q ? bq : bk;
  const float* nw = is_q ? q_norm : k_norm;
  const float b_i = bias ? bias[h * D + i] : 0.f, nw_i = nw ? nw[i] : 1.f;
  const float bv_i = !is_q && bv ? bv[h * D + i] : 0.f;
  const double freq = inv_freq[fi];
  pdl_wait();
  const float* src = qkv + static_cast<int64_t>(t) * (QD + 2 * KD) + (is_q ? h * D : QD + h * D);
  float v = src[i];
  if (bias) v += b_i;
  if (nw) {
    // head_dim may be < 32: reduce through shared memory
    buf[i] = v * v;
    __syncthreads();
    float ss = 0;
    for (int j = 0; j < D; ++j) ss += buf[j];
    __syncthreads();
    v = v * rsqrtf(ss / static_cast<float>(D) + d.eps) * nw_i;
  }
  buf[i] = v;
  __syncthreads();
  double sn, cs;
  sincos(static_cast<double>(pos[t]) * freq, &sn, &cs);
  const float c = static_cast<float>(cs), s = static_cast<float>(sn), o = buf[partner];
  float r = first ? v * c - o * s : o * s + v * c;
  const bool rotate = kv.type == KvType::int4r || kv.type == KvType::nsn2;
  __syncthreads();  // buf is reused by the rotation
  if (rotate) r = rotate_element(r, i, D, buf);
  if (is_q) {
    q_out[static_cast<int64_t>(t) * QD + h * D + i] = r;
    if (q16) q16[static_cast<int64_t>(t) * QD + h * D + i] = __half_as_ushort(__float2half_rn(r));
  } else {
    const int64_t off = ((static_cast<int64_t>(seq[t]) * d.n_head_kv + h) * d.n_ctx + pos[t]) * kv.row_bytes;
    store_kv_element(kv.type, r, i, D, kv.k + off, kv.codebook, nsh);
    float vv = src[KD + i];
    if (bv) vv += bv_i;
    if (rotate) vv = rotate_element(vv, i, D, buf);
    store_kv_element(kv.type, vv, i, D, kv.v + off, kv.codebook, nsh);
  }
}

void qkv_post(const float* qkv, int T, const AttnDims& d, const float* bq, const float* bk, const float* bv,
              const float* q_norm, const float* k_norm, const float* inv_freq, const int32_t* pos,
              const int32_t* seq, float* q_out, uint16_t* q16, LayerKv kv, cudaStream_t s) {
  if (T <= 0) return;
  if (d.head_dim > 256 || d.head_dim % 2) fail("CUDA attention: head_dim {} unsupported (even, <= 256)", d.head_dim);
  check_kv(kv, d);
  dim3 grid(static_cast<unsigned>(T), static_cast<unsigned>(d.n_head + d.n_head_kv));
  launch("qkv_post", qkv_post_kernel, grid, dim3(d.head_dim), 0, s, qkv, d, bq, bk, bv, q_norm, k_norm, inv_freq, pos,
         seq, q_out, q16, kv);
}

// ---------------------------------------------------------------------------------
// Flash decoding. Block (t * n_kv + g, split), 128 threads. A row group of D/8 lanes
// reads one cached position (8 numbers of K and of V per lane: 16 bytes of f16, 8 of int8,
// 4 of int4, plus the group's scales, or nsn2's 2 code bytes, the vector's scale and a
// codeword from the codebook (8 KB, L1-resident); dequantized in registers) and serves all G query
// heads of KV head g (G <= GM, a compile-time bound that sizes the register arrays); each
// group takes U positions per step, and issues the next step's loads before it computes on
// this step's (register double buffering: the memory latency overlaps the arithmetic), with
// an online softmax each, then the groups merge through shared memory into one partial
// (m, l, acc[D]) per (token, head, split). attn_combine merges the splits.
//
// A token at context L uses only as many of the grid's n_split splits as give each at least
// `per_split` positions (one step of the block's row groups: 16 at D = 128 for f16): at short
// contexts the other blocks return at once and attn_combine reads fewer partials. Session 9,
// 8B shape, contexts 33-72: 32 splits of 1-3 positions each cost ~1.6 us a layer more than
// 8 splits; per_split 16 measured equal to 8 and better than 32 (one step against two).

constexpr int kMaxG = 8;
constexpr int kAttnThreads = 128;

// The splits a token at context L uses (attn_decode_kernel and attn_combine_kernel agree).
__device__ __forceinline__ int splits_used(int L, int n_split, int per_split) {
  return max(1, min(n_split, (L + per_split - 1) / per_split));
}

template <int D, KvType C, int GM>
__global__ void __launch_bounds__(kAttnThreads)
attn_decode_kernel(const float* __restrict__ q, const int32_t* __restrict__ pos, const int32_t* __restrict__ seq,
                   AttnDims d, LayerKv kv, float scale, int n_split, int per_split, float* __restrict__ part) {
  pdl_launch_dependents();
  pdl_wait();
  constexpr int LPR = D / 8;               // lanes per row
  constexpr int NG = kAttnThreads / LPR;   // row groups per block
  constexpr int U = C == KvType::f16 ? 2 : 4;  // positions per group per step
  constexpr int RB = kv_row_bytes<C, D>();
  __shared__ float sm_m[NG][GM], sm_l[NG][GM];
  __shared__ float sm_acc[NG][GM][D];
  const int G = d.n_head / d.n_head_kv;
  const int t = blockIdx.x / d.n_head_kv, g = blockIdx.x % d.n_head_kv, split = blockIdx.y;
  const int grp = threadIdx.x / LPR, li = threadIdx.x % LPR;
  const int L = pos[t] + 1;
  const int ns = splits_used(L, n_split, per_split);
  if (split >= ns) return;  // (the whole block: no barrier is pending)
  const int chunk = (L + ns - 1) / ns;
  const int start = split * chunk, end = min(L, start + chunk);
  const int QD = d.n_head * D;
  const float qs = scale * 1.44269504088896341f;  // exp2 domain

  float qr[GM][8];
#pragma unroll
  for (int i = 0; i < GM; ++i) {
    if (i < G) {
      const float4* qp = reinterpret_cast<const float4*>(q + static_cast<int64_t>(t) * QD + (g * G + i) * D + li * 8);
      const float4 a = qp[0], b = qp[1];
      qr[i][0] = a.x * qs, qr[i][1] = a.y * qs, qr[i][2] = a.z * qs, qr[i][3] = a.w * qs;
      qr[i][4] = b.x * qs, qr[i][5] = b.y * qs, qr[i][6] = b.z * qs, qr[i][7] = b.w * qs;
    }
  }
  float m[GM], l[GM], acc[GM][8];
#pragma unroll
  for (int i = 0; i < GM; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
  }
  const int64_t base = (static_cast<int64_t>(seq[t]) * d.n_head_kv + g) * d.n_ctx;
  const uint8_t* kb = kv.k + base * RB;
  const uint8_t* vb = kv.v + base * RB;
  // Every lane of a warp runs the same number of iterations (the shuffles need them all).
  auto load_step = [&](int p0, KvLane<C>(&kr)[U], KvLane<C>(&vr)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int p = p0 + u * NG + grp;
      kr[u] = zero_lane<C>(), vr[u] = zero_lane<C>();
      if (p < end) {
        kr[u] = load_lane<C, D>(kb + static_cast<int64_t>(p) * RB, li);
        vr[u] = load_lane<C, D>(vb + static_cast<int64_t>(p) * RB, li);
      }
    }
  };
  KvLane<C> kn[U], vn[U];  // the next step's loads, in flight during this step's arithmetic
  load_step(start, kn, vn);
  for (int p0 = start; p0 < end; p0 += NG * U) {
    KvLane<C> kr[U], vr[U];
#pragma unroll
    for (int u = 0; u < U; ++u) kr[u] = kn[u], vr[u] = vn[u];
    load_step(p0 + NG * U, kn, vn);
    float sc[GM][U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[8];
      decode_lane<C>(kr[u], kf, kv.codebook);
#pragma unroll
      for (int i = 0; i < GM; ++i) {
        if (i < G) {
          float x = 0.f;
#pragma unroll
          for (int j = 0; j < 8; ++j) x = fmaf(qr[i][j], kf[j], x);
#pragma unroll
          for (int o = LPR / 2; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
          sc[i][u] = p0 + u * NG + grp < end ? x : -INFINITY;
        }
      }
    }
    if (p0 + grp >= end) continue;  // nothing valid for this group (u = 0 is the first)
#pragma unroll
    for (int i = 0; i < GM; ++i) {
      if (i < G) {
        float mn = m[i];
#pragma unroll
        for (int u = 0; u < U; ++u) mn = fmaxf(mn, sc[i][u]);
        const float corr = exp2f(m[i] - mn);
        l[i] *= corr;
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] *= corr;
#pragma unroll
        for (int u = 0; u < U; ++u) {
          sc[i][u] = exp2f(sc[i][u] - mn);  // the weight (0 for invalid positions)
          l[i] += sc[i][u];
        }
        m[i] = mn;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float vf[8];
      decode_lane<C>(vr[u], vf, kv.codebook);
#pragma unroll
      for (int i = 0; i < GM; ++i)
        if (i < G)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(sc[i][u], vf[j], acc[i][j]);
    }
  }
  // merge the row groups
#pragma unroll
  for (int i = 0; i < GM; ++i) {
    if (i < G) {
      if (li == 0) sm_m[grp][i] = m[i], sm_l[grp][i] = l[i];
#pragma unroll
      for (int j = 0; j < 8; ++j) sm_acc[grp][i][li * 8 + j] = acc[i][j];
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < G * D; e += kAttnThreads) {
    const int i = e / D, c = e % D;
    float M = -INFINITY;
    for (int k = 0; k < NG; ++k) M = fmaxf(M, sm_m[k][i]);
    float Ls = 0.f, A = 0.f;
    if (M != -INFINITY) {
      for (int k = 0; k < NG; ++k) {
        const float f = exp2f(sm_m[k][i] - M);
        Ls += sm_l[k][i] * f;
        A += sm_acc[k][i][c] * f;
      }
    }
    const int h = g * G + i;
    float* pp = part + ((static_cast<int64_t>(t) * d.n_head + h) * n_split + split) * (D + 2);
    pp[2 + c] = A;
    if (c == 0) pp[0] = M, pp[1] = Ls;
  }
}

// Output column c of row th = t * n_head + h (out is [T][n_head * D], so the row is th * D):
// a float, or quantized for the wo GEMV (every lane of the warp calls this: shuffles).
template <bool QUANT>
__device__ __forceinline__ void emit_combined(float v, int th, int c, int D, float* out, const QuantAct& qa) {
  const int64_t e = static_cast<int64_t>(th) * D + c;
  const float o[1] = {v};
  if constexpr (QUANT)
    quantize_block32<1>(o, true, qa.q + e, qa.d + e / 32, qa.s + e / 32);
  else
    out[e] = o[0];
}

// One block per (token, head). Warp 0 reads the splits' (m, l) in parallel (n_split <= 32)
// and turns them into weights f_s = 2^(m_s - M); then each thread sums its column over the
// splits with independent loads (the old serial chain of dependent loads took ~11 us a
// layer at 32 splits). With QUANT (D % 32 == 0, blockDim a multiple of 32 dividing D or
// D a multiple of it) each warp's 32 columns are one quant block of the wo GEMV's input.
// With ROT (int4r, nsn2) the merged row is in the rotated basis: it is un-rotated here, once per
// (token, head), through shared memory (x <- R^T x, as kv_unrotate).
template <bool QUANT, bool ROT>
__global__ void attn_combine_kernel(const float* __restrict__ part, const int32_t* __restrict__ pos, int n_head,
                                    int n_split, int per_split, int D, float* __restrict__ out, QuantAct qa) {
  pdl_launch_dependents();
  pdl_wait();
  __shared__ float f[32];
  __shared__ float inv_l;
  __shared__ float row[ROT ? 256 : 1];
  const int th = blockIdx.x;  // t * n_head + h
  const int ns = splits_used(pos[th / n_head] + 1, n_split, per_split);
  const float* pp = part + static_cast<int64_t>(th) * n_split * (D + 2);
  if (threadIdx.x < 32) {
    const int sp = threadIdx.x;
    const float m = sp < ns ? pp[sp * (D + 2)] : -INFINITY;
    const float l = sp < ns ? pp[sp * (D + 2) + 1] : 0.f;
    const float M = warp_max(m);
    const float w = m == -INFINITY ? 0.f : exp2f(m - M);
    const float L = warp_sum(w * l);
    f[sp] = w;
    if (sp == 0) inv_l = 1.f / L;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < D; c += blockDim.x) {
    float A = 0.f;
#pragma unroll 8
    for (int sp = 0; sp < ns; ++sp) A = fmaf(pp[sp * (D + 2) + 2 + c], f[sp], A);
    if constexpr (ROT) row[c] = A * inv_l;
    else emit_combined<QUANT>(A * inv_l, th, c, D, out, qa);
  }
  if constexpr (ROT) {
    fwht_shared(row, D);
    const float n = 1.0f / sqrtf(static_cast<float>(D));
    for (int c = threadIdx.x; c < D; c += blockDim.x)
      emit_combined<QUANT>(row[c] * (rot_sign(c) * n), th, c, D, out, qa);
  }
}

void check_kv(const LayerKv& kv, const AttnDims& d) {
  const bool quant = kv.type == KvType::int8 || kv.type == KvType::int4 || kv.type == KvType::int4r ||
                     kv.type == KvType::nsn2;
  if (!quant && kv.type != KvType::f16 && kv.type != KvType::f32)
    fail("CUDA attention: KV type {} unsupported (f32 and f16, both stored as f16; int8, int4, int4r, nsn2)",
         kv_type_name(kv.type));
  if (quant && (d.head_dim % 32 != 0 || d.head_dim < 32))
    fail("CUDA attention: KV type {} needs head_dim a multiple of 32 (got {})", kv_type_name(kv.type), d.head_dim);
  if ((kv.type == KvType::int4r || kv.type == KvType::nsn2) && (d.head_dim & (d.head_dim - 1)) != 0)
    fail("CUDA attention: KV type {} needs head_dim a power of two (got {})", kv_type_name(kv.type), d.head_dim);
  if (kv.type == KvType::nsn2 && !kv.codebook) fail("CUDA attention: KV type nsn2 needs its codebook on the GPU");
  if (kv.row_bytes != kv_row_bytes_of(kv.type, d.head_dim))
    fail("CUDA attention: KV rows of {} bytes, {} at head_dim {} has {}", kv.row_bytes, kv_type_name(kv.type),
         d.head_dim, kv_row_bytes_of(kv.type, d.head_dim));
}

int64_t kv_row_bytes_of(KvType t, int head_dim) {
  const int64_t D = head_dim;
  if (t == KvType::int8) return 2 * (D / 32) + D;
  if (t == KvType::int4 || t == KvType::int4r) return 4 * (D / 32) + D / 2;
  if (t == KvType::nsn2) return 4 + 2 * (D / kNsnSub);
  return 2 * D;
}

int attention_splits(int T, const AttnDims& d, int n_sm) {
  const int blocks = T * d.n_head_kv;
  return std::clamp((2 * n_sm + blocks - 1) / blocks, 1, 32);
}

template <int D, int GM>
static void launch_decode(dim3 grid, cudaStream_t s, const float* q, const int32_t* pos, const int32_t* seq,
                          const AttnDims& d, const LayerKv& kv, float scale, int n_split, int per_split, float* part) {
  const dim3 block(kAttnThreads);
  if constexpr (D >= 32) {
    if (kv.type == KvType::int8) {
      launch("attention_decode", attn_decode_kernel<D, KvType::int8, GM>, grid, block, 0, s, q, pos, seq, d, kv,
             scale, n_split, per_split, part);
      return;
    }
    if (kv.type == KvType::int4 || kv.type == KvType::int4r) {
      launch("attention_decode", attn_decode_kernel<D, KvType::int4, GM>, grid, block, 0, s, q, pos, seq, d, kv,
             scale, n_split, per_split, part);
      return;
    }
    if (kv.type == KvType::nsn2) {
      launch("attention_decode", attn_decode_kernel<D, KvType::nsn2, GM>, grid, block, 0, s, q, pos, seq, d, kv,
             scale, n_split, per_split, part);
      return;
    }
  }
  launch("attention_decode", attn_decode_kernel<D, KvType::f16, GM>, grid, block, 0, s, q, pos, seq, d, kv, scale,
         n_split, per_split, part);
}

// The register arrays sized for the fewest heads that hold G.
template <int D>
static void launch_decode_g(dim3 grid, cudaStream_t s, const float* q, const int32_t* pos, const int32_t* seq,
                            const AttnDims& d, const LayerKv& kv, float scale, int n_split, int per_split, float* part) {
  const int G = d.n_head / d.n_head_kv;
  if (G <= 1) launch_decode<D, 1>(grid, s, q, pos, seq, d, kv, scale, n_split, per_split, part);
  else if (G <= 2) launch_decode<D, 2>(grid, s, q, pos, seq, d, kv, scale, n_split, per_split, part);
  else if (G <= 4) launch_decode<D, 4>(grid, s, q, pos, seq, d, kv, scale, n_split, per_split, part);
  else launch_decode<D, kMaxG>(grid, s, q, pos, seq, d, kv, scale, n_split, per_split, part);
}

void attention_decode(const float* q, int T, const int32_t* pos, const int32_t* seq, const AttnDims& d, LayerKv kv,
                      float scale, int n_split, float* part, float* out, cudaStream_t s, const QuantAct* qout) {
  if (T <= 0) return;
  const int G = d.n_head / d.n_head_kv;
  if (G > kMaxG || d.n_head % d.n_head_kv) fail("CUDA attention: {} query heads per KV head unsupported (<= {})", G, kMaxG);
  if (qout && d.head_dim % 32 != 0) fail("CUDA attention: quantized output needs head_dim % 32 == 0 (got {})", d.head_dim);
  if (n_split < 1 || n_split > 32) fail("CUDA attention: {} splits unsupported (1 to 32)", n_split);
  check_kv(kv, d);
  const dim3 grid(static_cast<unsigned>(T * d.n_head_kv), static_cast<unsigned>(n_split));
  // positions one step of a block covers: row groups x positions a group takes a step
  const int per_split = kAttnThreads / (d.head_dim / 8) * (kv.type == KvType::f16 || kv.type == KvType::f32 ? 2 : 4);
  switch (d.head_dim) {
    case 16: launch_decode_g<16>(grid, s, q, pos, seq, d, kv, scale, n_split, per_split, part); break;
    case 32: launch_decode_g<32>(grid, s, q, pos, seq, d, kv, scale, n_split, per_split, part); break;
    case 64: launch_decode_g<64>(grid, s, q, pos, seq, d, kv, scale, n_split, per_split, part); break;
    case 128: launch_decode_g<128>(grid, s, q, pos, seq, d, kv, scale, n_split, per_split, part); break;
    case 256: launch_decode_g<256>(grid, s, q, pos, seq, d, kv, scale, n_split, per_split, part); break;
    default: fail("CUDA attention: head_dim {} unsupported (16, 32, 64, 128, 256)", d.head_dim);
  }
  const dim3 cgrid(static_cast<unsigned>(T * d.n_head)), cblock(std::clamp(d.head_dim, 32, 128));
  const QuantAct qa = qout ? *qout : QuantAct{};
  const bool rot = kv.type == KvType::int4r || kv.type == KvType::nsn2;
  auto combine = [&](auto kernel) {
    launch("attention_combine", kernel, cgrid, cblock, 0, s, part, pos, d.n_head, n_split, per_split, d.head_dim, out,
           qa);
  };
  if (qout && rot) combine(attn_combine_kernel<true, true>);
  else if (qout) combine(attn_combine_kernel<true, false>);
  else if (rot) combine(attn_combine_kernel<false, true>);
  else combine(attn_combine_kernel<false, false>);
}

}  // namespace brisk::cuda
