// matmul driver: weight rows are split into fixed tiles (so the split never depends on the
// thread count); each tile is dequantized to float32 once into a per-thread buffer and
// multiplied with every token by the ISA's dot-product tile kernel.
#include <algorithm>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/ops.h"
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

// Quantized weights with an integer kernel: the activations are quantized to 8 bits once
// (per token, the same for decode and prefill), then each thread takes fixed tiles of rows
// and runs them against every token. A token's result never depends on the batch.
void matmul_q8(QDotTileFn qdot, QuantizeActFn quantize, const TensorView& W, const float* x,
               int64_t n_tokens, float* y) {
  const int64_t k = W.ne[0], rows = W.rows(), nb = k / 32;
  const size_t rb = W.row_size();
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xd;
  if (xq.size() < static_cast<size_t>(n_tokens * k)) xq.resize(static_cast<size_t>(n_tokens * k));
  if (xd.size() < static_cast<size_t>(n_tokens * nb)) xd.resize(static_cast<size_t>(n_tokens * nb));
  int8_t* q = xq.data();
  float* d = xd.data();
  ThreadPool& pool = ThreadPool::global();
  if (n_tokens == 1) {
    quantize(x, k, q, d);
    // Decode: stream the weight rows once; fixed 16-row chunks.
    const int64_t chunk = 16, n_chunks = (rows + chunk - 1) / chunk;
    pool.parallel_for(n_chunks, [&](int64_t b, int64_t e, int) {
      const int64_t r0 = b * chunk, r1 = std::min(rows, e * chunk);
      qdot(W.row(r0), rb, r1 - r0, q, d, 1, k, y + r0, rows);
    });
    return;
  }
  pool.parallel_for(n_tokens, [&](int64_t b, int64_t e, int) {
    for (int64_t t = b; t < e; ++t) quantize(x + t * k, k, q + t * k, d + t * nb);
  });
  // Prefill: a tile of rows (~32 KB of weights, in L1/L2) meets blocks of tokens.
  const int64_t rt = std::clamp<int64_t>(((32 << 10) / static_cast<int64_t>(rb)) & ~int64_t(3), 4, 64);
  const int64_t n_tiles = (rows + rt - 1) / rt, tb = 64;
  pool.parallel_for(n_tiles, [&](int64_t b, int64_t e, int) {
    for (int64_t tile = b; tile < e; ++tile) {
      const int64_t r0 = tile * rt, nr = std::min(rt, rows - r0);
      for (int64_t t0 = 0; t0 < n_tokens; t0 += tb)
        qdot(W.row(r0), rb, nr, q + t0 * k, d + t0 * nb, std::min(tb, n_tokens - t0), k,
             y + t0 * rows + r0, rows);
    }
  });
}

}  // namespace

void matmul(const TensorView& W, const float* x, int64_t n_tokens, float* y) {
  const int64_t k = W.ne[0], rows = W.rows();
  const DTypeInfo& ti = info(W.type);
  if (!ti.supported) fail("matmul: weight {} has unsupported type {}", W.name, ti.name);
  if (k % ti.block_elems != 0)
    fail("matmul: weight {} row length {} is not a multiple of {}", W.name, k, ti.block_elems);
  if (n_tokens <= 0 || rows <= 0) return;
  const KernelTable& kt = kernel_table();
  if (QDotTileFn qdot = kt.qdot[static_cast<int>(W.type)]) {
    matmul_q8(qdot, kt.quantize_act, W, x, n_tokens, y);
    return;
  }
  DequantFn deq = kt.dequant[static_cast<int>(W.type)];
  // The fused GEMV reads plain 16-bit rows 16 values at a time, so it needs k % 16 == 0.
  const bool plain16 = W.type == DType::F16 || W.type == DType::BF16;
  if (n_tokens == 1 && kt.gemv[static_cast<int>(W.type)] && (!plain16 || k % 16 == 0)) {
    // Decode: stream each weight row once, dequantizing in registers. Fixed 16-row chunks
    // keep the split independent of the thread count.
    GemvFn gemv = kt.gemv[static_cast<int>(W.type)];
    const int64_t chunk = 16, n_chunks = (rows + chunk - 1) / chunk;
    const size_t rb = W.row_size();
    ThreadPool::global().parallel_for(n_chunks, [&](int64_t b, int64_t e, int) {
      const int64_t r0 = b * chunk, r1 = std::min(rows, e * chunk);
      gemv(W.row(r0), rb, r1 - r0, x, k, y + r0);
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
  bool fused = n_tokens == 1 && n <= 8;
  bool any_q8 = false;
  for (int i = 0; i < n && fused; ++i) {
    const int t = static_cast<int>(W[i]->type);
    const bool plain16 = W[i]->type == DType::F16 || W[i]->type == DType::BF16;
    fused = W[i]->ne[0] == W[0]->ne[0] && info(W[i]->type).supported &&
            W[i]->ne[0] % info(W[i]->type).block_elems == 0 &&
            (kt.qdot[t] || (kt.gemv[t] && (!plain16 || W[i]->ne[0] % 16 == 0)));
    any_q8 = any_q8 || kt.qdot[t];
  }
  if (!fused) {
    for (int i = 0; i < n; ++i) matmul(*W[i], x, n_tokens, y[i]);
    return;
  }
  // The same kernels and per-row work as matmul's decode path, so results are identical.
  const int64_t k = W[0]->ne[0], chunk = 16;
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xd;
  if (any_q8) {
    xq.resize(static_cast<size_t>(k));
    xd.resize(static_cast<size_t>(k / 32));
    kt.quantize_act(x, k, xq.data(), xd.data());
  }
  const int8_t* q = xq.data();  // the caller's thread_local buffers, read by every thread
  const float* d = xd.data();
  int64_t first[9] = {0};
  for (int i = 0; i < n; ++i) first[i + 1] = first[i] + (W[i]->rows() + chunk - 1) / chunk;
  ThreadPool::global().parallel_for(first[n], [&](int64_t b, int64_t e, int) {
    for (int i = 0; i < n; ++i) {
      const int64_t cb = std::max(b, first[i]) - first[i], ce = std::min(e, first[i + 1]) - first[i];
      if (cb >= ce) continue;
      const TensorView& w = *W[i];
      const int64_t rows = w.rows(), r0 = cb * chunk, r1 = std::min(rows, ce * chunk);
      const int t = static_cast<int>(w.type);
      if (kt.qdot[t])
        kt.qdot[t](w.row(r0), w.row_size(), r1 - r0, q, d, 1, k, y[i] + r0, rows);
      else
        kt.gemv[t](w.row(r0), w.row_size(), r1 - r0, x, k, y[i] + r0);
    }
  });
}

void get_row(const TensorView& W, int64_t id, float* out) {
  if (id < 0 || id >= W.rows())
    fail("get_row: row {} out of range for {} with {} rows", id, W.name, W.rows());
  DequantFn deq = kernel_table().dequant[static_cast<int>(W.type)];
  if (!deq) fail("get_row: {} has unsupported type {}", W.name, dtype_name(W.type));
  deq(W.row(id), out, W.ne[0]);
}

}  // namespace brisk
