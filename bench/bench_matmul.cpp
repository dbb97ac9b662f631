// Microbenchmark of matmul per weight type: prefill GEMM (many tokens) in GFLOP/s and
// decode GEMV (one token) in weight bytes/s. BRISK_ISA selects the path.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/packed_matrix.h"
#include "tensor/quant.h"
#include "util/thread_pool.h"

namespace {

using namespace brisk;

struct Fixture {
  std::vector<uint8_t> w;
  PackedMatrix packed;
  TensorView view;  // packed where the model packs (Q8_0, Q4_0)
  std::vector<float> x, y;
};

Fixture make(DType t, int64_t k, int64_t rows, int64_t n_tok) {
  Fixture f;
  std::mt19937 rng(42);
  std::normal_distribution<float> nd(0, 0.05f);
  std::vector<float> row(k);
  size_t rb = row_bytes(t, k);
  f.w.resize(rb * rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : row) v = nd(rng);
    quantize_row(t, row.data(), f.w.data() + r * rb, k);
  }
  f.view.type = t;
  f.view.n_dims = 2;
  f.view.ne = {k, rows, 1, 1};
  f.view.data = f.w.data();
  if (packable(f.view)) {
    f.packed = pack_matrix(f.view);
    f.view = f.packed.view;
  }
  f.x.resize(n_tok * k);
  for (auto& v : f.x) v = nd(rng);
  f.y.resize(n_tok * rows);
  return f;
}

// args: type id, k (row length), rows, n_tokens
void BM_matmul(benchmark::State& st) {
  auto t = static_cast<DType>(st.range(0));
  int64_t k = st.range(1), rows = st.range(2), n_tok = st.range(3);
  Fixture f = make(t, k, rows, n_tok);
  for (auto _ : st) {
    matmul(f.view, f.x.data(), n_tok, f.y.data());
    benchmark::DoNotOptimize(f.y.data());
  }
  double flops = 2.0 * k * rows * n_tok;
  st.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["wbytes/s"] = benchmark::Counter(static_cast<double>(f.view.nbytes()),
                                               benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1024);
  st.SetLabel(std::string(dtype_name(t)) + (f.view.row_group > 1 ? " packed " : " ") + isa_name(active_isa()));
}

void args(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K}) {
    int64_t id = static_cast<int64_t>(t);
    b->Args({id, 1024, 1024, 512});  // prefill, 1024 x 1024 weight
    b->Args({id, 1024, 384, 512});   // prefill, 384 rows of 1024
    b->Args({id, 1024, 1024, 16});   // batched decode, 16 sequences one token each
    b->Args({id, 384, 16384, 16});   // brisk-tiny output at 16 sequences (beyond L2)
    b->Args({id, 4096, 4096, 1});    // decode GEMV, 4096 x 4096 (streams from memory)
    b->Args({id, 1024, 1024, 1});    // decode GEMV, 1024 x 1024 (cache resident)
    for (int64_t nt : {1, 4, 5}) b->Args({id, 512, 1408, nt});  // brisk-small gate: verification passes
  }
}

BENCHMARK(BM_matmul)->Apply(args)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

// BRISK_THREADS=n sets the kernel thread pool size (default: all cores).
int main(int argc, char** argv) {
  if (const char* t = std::getenv("BRISK_THREADS")) brisk::ThreadPool::set_global_threads(std::atoi(t));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
