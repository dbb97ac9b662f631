// Microbenchmark of decode attention: one token of each of `seqs` sequences attending to
// `ctx` cached positions, Llama-3.2-1B's head shape (32 query heads, 8 KV heads of 64),
// f32 or f16 K/V in blocks of `block` positions. Reports K/V bytes read per second. At 8,192
// positions (32 MB a layer, beyond the L3 cache) it reads ~7 GB/s on one Zen 4 core against
// ~17 GB/s of plain streaming. A head's 256 bytes of each position row sit 2 KB apart,
// and neither software prefetching, nor storing each head's positions together, nor
// scoring 4 query rows per K load (4 x 4 register blocking: slower) helped (measured).
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dispatch.h"
#include "tensor/quant.h"
#include "util/thread_pool.h"

namespace {

using namespace brisk;

// args: context, block size, sequences, brisk-tiny's head shape (6 query heads, 2 KV heads),
// f16 K/V (instead of f32)
void BM_attention_decode(benchmark::State& st) {
  const int64_t ctx = st.range(0), block = st.range(1), seqs = st.range(2);
  const bool f16 = st.range(4) != 0;
  const int64_t elem = f16 ? 2 : 4;
  const AttentionShape shape = st.range(3) ? AttentionShape{6, 2, 64, 1.0f / 8} : AttentionShape{32, 8, 64, 1.0f / 8};
  const int64_t row = shape.n_head_kv * shape.head_dim, n_blocks = (ctx + block - 1) / block;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0, 1);
  // One arena for all blocks, like the KV cache's pool.
  const size_t n = static_cast<size_t>(2 * seqs * n_blocks * block * row);
  void* mem = mmap(nullptr, n * elem, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  madvise(mem, n * elem, MADV_HUGEPAGE);  // 2 MiB pages, as the KV cache's HugePageBuffer asks for
  char* arena = static_cast<char*>(mem);
  for (size_t i = 0; i < n; ++i) {
    if (f16) reinterpret_cast<uint16_t*>(arena)[i] = fp32_to_fp16(nd(rng));
    else reinterpret_cast<float*>(arena)[i] = nd(rng);
  }
  std::vector<std::vector<const float*>> kp(seqs), vp(seqs);  // blocks of any type, as the cache's
  const auto at = [&](int64_t i) { return reinterpret_cast<const float*>(arena + i * block * row * elem); };
  std::vector<KvSeqView> views(seqs);
  // Blocks handed out interleaved across sequences (as a pool serving many would).
  for (int64_t b = 0; b < n_blocks; ++b)
    for (int64_t s = 0; s < seqs; ++s) {
      kp[s].push_back(at((b * seqs + s) * 2));
      vp[s].push_back(at((b * seqs + s) * 2 + 1));
    }
  for (int64_t s = 0; s < seqs; ++s)
    views[s] = KvSeqView{kp[s].data(), vp[s].data(), block, f16 ? 2 * row : row, f16 ? KvType::f16 : KvType::f32};
  std::vector<float> q(seqs * shape.n_head * shape.head_dim), out(q.size());
  for (auto& x : q) x = nd(rng);
  std::vector<int32_t> pos(seqs, static_cast<int32_t>(ctx - 1));
  std::vector<const KvSeqView*> vptr(seqs);
  for (int64_t s = 0; s < seqs; ++s) vptr[s] = &views[s];
  for (auto _ : st) {
    attention(q.data(), seqs, pos.data(), vptr.data(), shape, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  munmap(mem, n * elem);
  st.counters["kvbytes/s"] = benchmark::Counter(static_cast<double>(2 * seqs * ctx * row * elem),
                                                benchmark::Counter::kIsIterationInvariantRate,
                                                benchmark::Counter::kIs1024);
  st.SetLabel(std::string(isa_name(active_isa())) + (f16 ? " f16" : " f32"));
}

BENCHMARK(BM_attention_decode)
    ->ArgsProduct({{2048}, {16, 2048}, {1}, {0}, {0, 1}})
    ->ArgsProduct({{8192, 32768}, {16}, {1}, {0}, {0, 1}})
    ->ArgsProduct({{256}, {16}, {16}, {0}, {0, 1}})
    ->ArgsProduct({{72, 200}, {16}, {16}, {1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

// BRISK_THREADS=n sets the kernel thread pool size (default: all cores).
int main(int argc, char** argv) {
  if (const char* t = std::getenv("BRISK_THREADS")) brisk::ThreadPool::set_global_threads(std::atoi(t));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
