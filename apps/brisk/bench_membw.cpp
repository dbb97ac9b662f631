#include "bench_membw.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>

#include "util/error.h"
#include "util/huge_page_buffer.h"

namespace brisk {
namespace {

// Each reader sums 64-bit lanes into independent accumulators (no loop-carried chain
// longer than one add per register) and returns the sum so the loads cannot be dropped.
__attribute__((target("avx512f"))) uint64_t read_avx512(const uint8_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 256 <= n; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  a0 = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
  alignas(64) uint64_t l[8];
  _mm512_store_si512(l, a0);
  return l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7];
}

__attribute__((target("avx2"))) uint64_t read_avx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t l[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), a0);
  return l[0] + l[1] + l[2] + l[3];
}

uint64_t read_scalar(const uint8_t* p, size_t n) {
  const uint64_t* q = reinterpret_cast<const uint64_t*>(p);
  uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  for (size_t i = 0; i + 4 <= n / 8; i += 4) a0 += q[i], a1 += q[i + 1], a2 += q[i + 2], a3 += q[i + 3];
  return a0 + a1 + a2 + a3;
}

}  // namespace

MembwResult measure_membw(int threads, size_t bytes, int reps) {
  if (threads < 1) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (reps < 1) fail("--membw: repetitions must be >= 1, got {}", reps);
  constexpr size_t kChunk = 4096;  // every thread's part starts on a page
  bytes = std::max(bytes / (kChunk * threads), size_t{1}) * kChunk * threads;
  uint64_t (*reader)(const uint8_t*, size_t) = read_scalar;
  MembwResult r;
  r.threads = threads;
  r.bytes = bytes;
  r.isa = "scalar";
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) reader = read_avx512, r.isa = "avx512";
  else if (__builtin_cpu_supports("avx2")) reader = read_avx2, r.isa = "avx2";

  // On 2 MiB pages like the packed weights it is compared with (4 KiB pages read ~30% slower
  // here: a page walk and a prefetcher stop every 4 KiB); BRISK_NO_HUGE_PAGES=1 as there.
  HugePageBuffer buf(bytes);
  const size_t part = bytes / threads;

  // Persistent readers: each waits for a new round number, reads its part, reports done.
  std::atomic<int> round{0}, done{0};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sink{0};
  auto body = [&](int t) {
    int seen = 0;
    for (;;) {
      int cur;
      while ((cur = round.load(std::memory_order_acquire)) == seen && !stop.load()) std::this_thread::yield();
      if (stop.load()) return;
      seen = cur;
      const uint8_t* p = buf.data() + t * part;
      if (cur == 1) std::memset(const_cast<uint8_t*>(p), t + 1, part);  // fault pages in, nonzero
      else sink.fetch_add(reader(p, part), std::memory_order_relaxed);
      done.fetch_add(1, std::memory_order_acq_rel);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(body, t);
  auto run_round = [&](int n) {
    done.store(0);
    round.store(n, std::memory_order_release);
    const uint8_t* p = buf.data();
    if (n == 1) std::memset(buf.data(), 1, part);
    else sink.fetch_add(reader(p, part), std::memory_order_relaxed);
    done.fetch_add(1, std::memory_order_acq_rel);
    while (done.load(std::memory_order_acquire) < threads) std::this_thread::yield();
  };
  run_round(1);  // write
  run_round(2);  // untimed read
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    run_round(3 + i);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.gbps.push_back(bytes / s / 1e9);
  }
  stop.store(true);
  for (auto& th : pool) th.join();
  std::vector<double> v = r.gbps;
  std::sort(v.begin(), v.end());
  r.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  r.min = v.front();
  r.max = v.back();
  if (sink.load() == 0x5eed) std::fprintf(stderr, " ");  // keeps the sums alive
  return r;
}

}  // namespace brisk
