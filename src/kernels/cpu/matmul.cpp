// matmul driver: weight rows are split into fixed tiles (so the split never depends on the
// thread count); each tile is dequantized to float32 once into a per-thread buffer and
// multiplied with every token by the ISA's dot-product tile kernel.
#include <algorithm>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/packed_matrix.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace brisk {

namespace {

// Rows per tile: the float32 tile should stay in L2 while all tokens stream past it (GEMM),
// or in L1 for a few tokens (GEMV), where the buffer only stages rows for the dot.
// At least 4 rows so the micro-kernel has independent accumulators.
int64_t tile_rows(int64_t k, int64_t n_tokens) {
  int64_t budget = n_tokens < 4 ? (32 << 10) : (160 << 10);
  int64_t r = budget / (k * 4);
  return std::clamp<int64_t>(r, 4, 64) & ~int64_t(3);
}

constexpr int64_t kTokenBlock = 48;  // tokens per pass over a tile: their rows stay in L2

// Up to this many tokens, unpacked weights take the fused GEMV (see matmul).
constexpr int64_t kGemvTokens = 8;

// Activations quantized to 8 bits per block of 32 (dispatch.h: QuantizeActFn), with the
// integer sum of each 16 (the packed kernels subtract offset * sum). Per-thread buffers.
struct QuantizedActs {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> sum;

  void quantize(QuantizeActFn fn, const float* x, int64_t n_tokens, int64_t k) {
    const int64_t nb = k / 32;
    if (q.size() < static_cast<size_t>(n_tokens * k)) q.resize(static_cast<size_t>(n_tokens * k));
    if (d.size() < static_cast<size_t>(n_tokens * nb)) d.resize(static_cast<size_t>(n_tokens * nb));
    if (sum.size() < static_cast<size_t>(n_tokens * k / 16)) sum.resize(static_cast<size_t>(n_tokens * k / 16));
    auto one = [&](int64_t t) {
      fn(x + t * k, k, q.data() + t * k, d.data() + t * nb);
      for (int64_t b = 0; b < k / 16; ++b) {
        int32_t s = 0;
        for (int i = 0; i < 16; ++i) s += q[t * k + 16 * b + i];
        sum[t * k / 16 + b] = s;
      }
    };
    if (n_tokens * k < (1 << 13)) {  // a few tokens (~4 us): no more than a parallel region costs
      for (int64_t t = 0; t < n_tokens; ++t) one(t);
      return;
    }
    ThreadPool::global().parallel_for(n_tokens, [&](int64_t b, int64_t e, int) {
      for (int64_t t = b; t < e; ++t) one(t);
    });
  }
};

QuantizedActs& thread_acts() {
  thread_local QuantizedActs a;
  return a;
}

// Groups of 16 rows a unit of work takes from a packed matrix with `n_groups` groups.
// Decode: 1, and each thread streams its whole share of rows once. More tokens: an even
// number (the kernels take groups in pairs) of ~128 KB of weights, which stay in L2 while
// the tokens pass over them in blocks of 64; but at most an eighth of the matrix, so a
// small matrix (brisk-tiny's 128-row K/V projections are 8 groups) still spreads over the
// threads. Every row's result is the same whatever the split.
int64_t unit_groups(size_t group_bytes, int64_t n_groups, int64_t n_tokens) {
  if (n_tokens == 1) return 1;
  const int64_t l2 = std::max<int64_t>(2, ((128 << 10) / static_cast<int64_t>(group_bytes)) & ~int64_t(1));
  return std::min(l2, std::max<int64_t>(2, (n_groups / 8) & ~int64_t(1)));
}

bool is_plain16(DType t) { return t == DType::F16 || t == DType::BF16; }

// Rows r..r+nr-1 of the packed matrix w for tokens t0..t0+nt-1 (y: w's output, rows() a
// token): 16-bit weights read x as it is, the integer kernels its 8-bit quantization a.
void packed_rows(const KernelTable& kt, const TensorView& w, int64_t r, int64_t nr, const float* x,
                 const QuantizedActs& a, int64_t t0, int64_t nt, float* y) {
  const int t = static_cast<int>(w.type);
  const int64_t k = w.ne[0], rows = w.rows();
  const size_t gb = packed_group_bytes(w);
  const uint8_t* g = static_cast<const uint8_t*>(w.data) + (r / kPackRows) * gb;
  float* out = y + t0 * rows + r;
  if (is_plain16(w.type))
    kt.packed16_dot[t](g, gb, nr, x + t0 * k, nt, k, out, rows);
  else
    kt.packed_dot[t](g, gb, nr, a.q.data() + t0 * k, a.d.data() + t0 * k / 32, a.sum.data() + t0 * k / 16, nt, k,
                     out, rows);
}

// Packed weights (kernels/packed_matrix.h), for n matrices that read the same input x, in
// one parallel region: each unit is whole 16-row groups of one matrix, so a row's result
// never depends on the split, the batch or n.
void matmul_packed(const TensorView* const* W, float* const* y, int n, const float* x,
                   const QuantizedActs& a, int64_t n_tokens) {
  const KernelTable& kt = kernel_table();
  const int64_t tb = 64;
  int64_t tile[9], first[9] = {0};
  for (int i = 0; i < n; ++i) {
    const int64_t n_groups = (W[i]->rows() + kPackRows - 1) / kPackRows;
    tile[i] = unit_groups(packed_group_bytes(*W[i]), n_groups, n_tokens);
    first[i + 1] = first[i] + (n_groups + tile[i] - 1) / tile[i];
  }
  ThreadPool::global().parallel_for(first[n], [&](int64_t b, int64_t e, int) {
    for (int i = 0; i < n; ++i) {
      const int64_t ub = std::max(b, first[i]) - first[i], ue = std::min(e, first[i + 1]) - first[i];
      if (ub >= ue) continue;
      const TensorView& w = *W[i];
      const int64_t rows = w.rows(), step = tile[i] * kPackRows;
      const int64_t r0 = ub * step, r1 = std::min(rows, ue * step);
      if (n_tokens == 1) {  // decode: stream this thread's rows once
        packed_rows(kt, w, r0, r1 - r0, x, a, 0, 1, y[i]);
        continue;
      }
      for (int64_t r = r0; r < r1; r += step)
        for (int64_t t0 = 0; t0 < n_tokens; t0 += tb)
          packed_rows(kt, w, r, std::min(step, r1 - r), x, a, t0, std::min(tb, n_tokens - t0), y[i]);
    }
  });
}

bool is_packed(const TensorView& W, const KernelTable& kt) {
  const int t = static_cast<int>(W.type);
  return W.row_group == kPackRows && (is_plain16(W.type) ? kt.packed16_dot[t] != nullptr : kt.packed_dot[t] != nullptr);
}

// Whether W is packed for the integer kernels, which read 8-bit activations.
bool takes_q8_acts(const TensorView& W, const KernelTable& kt) { return is_packed(W, kt) && !is_plain16(W.type); }

}  // namespace

void matmul(const TensorView& W, const float* x, int64_t n_tokens, float* y) {
  const int64_t k = W.ne[0], rows = W.rows();
  const DTypeInfo& ti = info(W.type);
  if (!ti.supported) fail("matmul: weight {} has unsupported type {}", W.name, ti.name);
  if (k % ti.block_elems != 0)
    fail("matmul: weight {} row length {} is not a multiple of {}", W.name, k, ti.block_elems);
  if (n_tokens <= 0 || rows <= 0) return;
  const KernelTable& kt = kernel_table();
  if (W.row_group != 1) {
    if (!is_packed(W, kt)) fail("matmul: weight {} has an unknown packed layout", W.name);
    QuantizedActs& a = thread_acts();
    if (takes_q8_acts(W, kt)) a.quantize(kt.quantize_act, x, n_tokens, k);
    const TensorView* ws[1] = {&W};
    matmul_packed(ws, &y, 1, x, a, n_tokens);
    return;
  }
  DequantFn deq = kt.dequant[static_cast<int>(W.type)];
  if (n_tokens <= kGemvTokens && kt.gemv[static_cast<int>(W.type)]) {
    // Decode, and the few tokens of a speculative verification pass, on quantized rows
    // that are not packed: stream each weight row once, dequantizing in registers for all
    // the tokens (the tile path below stages float32 copies of the weights). Fixed 16-row
    // chunks keep the split independent of the thread count.
    GemvFn gemv = kt.gemv[static_cast<int>(W.type)];
    const int64_t chunk = 16, n_chunks = (rows + chunk - 1) / chunk;
    const size_t rb = W.row_size();
    ThreadPool::global().parallel_for(n_chunks, [&](int64_t b, int64_t e, int) {
      const int64_t r0 = b * chunk, r1 = std::min(rows, e * chunk);
      gemv(W.row(r0), rb, r1 - r0, x, k, n_tokens, y + r0, rows);
    });
    return;
  }
  const int64_t rt = tile_rows(k, n_tokens);
  const int64_t n_tiles = (rows + rt - 1) / rt;
  const bool direct = W.type == DType::F32;  // rows are already float32: no staging copy

  ThreadPool::global().parallel_for(n_tiles, [&](int64_t b, int64_t e, int) {
    thread_local std::vector<float> buf;
    if (!direct && buf.size() < static_cast<size_t>(rt * k)) buf.resize(static_cast<size_t>(rt * k));
    for (int64_t tile = b; tile < e; ++tile) {
      const int64_t r0 = tile * rt, nr = std::min(rt, rows - r0);
      const float* w;
      if (direct) {
        w = reinterpret_cast<const float*>(W.row(r0));
      } else {
        for (int64_t r = 0; r < nr; ++r) deq(W.row(r0 + r), buf.data() + r * k, k);
        w = buf.data();
      }
      for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenBlock) {
        const int64_t nt = std::min(kTokenBlock, n_tokens - t0);
        kt.dot_tile(w, k, nr, x + t0 * k, k, nt, k, y + t0 * rows + r0, rows);
      }
    }
  });
}

void matmul_multi(const TensorView* const* W, float* const* y, int n, const float* x,
                  int64_t n_tokens) {
  const KernelTable& kt = kernel_table();
  bool fused = n_tokens <= kGemvTokens && n <= 8;
  bool any_q8 = false;  // whether some matrix reads 8-bit activations
  for (int i = 0; i < n; ++i) any_q8 = any_q8 || takes_q8_acts(*W[i], kt);
  for (int i = 0; i < n && fused; ++i) {
    const int t = static_cast<int>(W[i]->type);
    fused = W[i]->ne[0] == W[0]->ne[0] && info(W[i]->type).supported &&
            W[i]->ne[0] % info(W[i]->type).block_elems == 0 &&
            (is_packed(*W[i], kt) || (W[i]->row_group == 1 && kt.gemv[t]));
  }
  if (!fused) {
    // More tokens: packed weights still share one quantized input and one region.
    bool all_packed = n <= 8;
    for (int i = 0; i < n; ++i) all_packed = all_packed && is_packed(*W[i], kt) && W[i]->ne[0] == W[0]->ne[0];
    if (all_packed) {
      QuantizedActs& a = thread_acts();
      if (any_q8) a.quantize(kt.quantize_act, x, n_tokens, W[0]->ne[0]);
      matmul_packed(W, y, n, x, a, n_tokens);
      return;
    }
    for (int i = 0; i < n; ++i) matmul(*W[i], x, n_tokens, y[i]);
    return;
  }
  // The same kernels and per-row work as matmul's decode path, so results are identical.
  const int64_t k = W[0]->ne[0], chunk = 16;
  QuantizedActs& a = thread_acts();  // the caller's, read by every thread
  if (any_q8) a.quantize(kt.quantize_act, x, n_tokens, k);
  int64_t first[9] = {0};
  for (int i = 0; i < n; ++i) first[i + 1] = first[i] + (W[i]->rows() + chunk - 1) / chunk;
  ThreadPool::global().parallel_for(first[n], [&](int64_t b, int64_t e, int) {
    for (int i = 0; i < n; ++i) {
      const int64_t cb = std::max(b, first[i]) - first[i], ce = std::min(e, first[i + 1]) - first[i];
      if (cb >= ce) continue;
      const TensorView& w = *W[i];
      const int64_t rows = w.rows(), r0 = cb * chunk, r1 = std::min(rows, ce * chunk);
      if (w.row_group == kPackRows)
        packed_rows(kt, w, r0, r1 - r0, x, a, 0, n_tokens, y[i]);
      else
        kt.gemv[static_cast<int>(w.type)](w.row(r0), w.row_size(), r1 - r0, x, k, n_tokens, y[i] + r0, rows);
    }
  });
}

void get_row(const TensorView& W, int64_t id, float* out) {
  if (W.row_group != 1) fail("get_row: {} is packed for matmul; embed from the plain tensor", W.name);
  if (id < 0 || id >= W.rows())
    fail("get_row: row {} out of range for {} with {} rows", id, W.name, W.rows());
  DequantFn deq = kernel_table().dequant[static_cast<int>(W.type)];
  if (!deq) fail("get_row: {} has unsupported type {}", W.name, dtype_name(W.type));
  deq(W.row(id), out, W.ne[0]);
}

}  // namespace brisk
