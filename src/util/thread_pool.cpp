#include "util/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BRISK_CPU_RELAX() _mm_pause()
#else
#define BRISK_CPU_RELAX() std::this_thread::yield()
#endif

namespace brisk {

namespace {

// How long an idle thread spins before it sleeps: long enough to cover the gaps between
// the parallel regions of one decode step (norms, rope, sampling), short enough that an
// idle pool does not burn a core.
// BRISK_SPIN_US overrides it (0: sleep at once, for oversubscribed machines).
std::chrono::microseconds spin_time() {
  static const std::chrono::microseconds t = [] {
    const char* e = std::getenv("BRISK_SPIN_US");
    return std::chrono::microseconds(e && *e ? std::atol(e) : 200);
  }();
  return t;
}

// Whether threads spin at all: turned off for a while when the machine is oversubscribed
// (see parallel_for), where spinning burns the time slices the other thread needs.
std::atomic<bool> g_spin{true};

// Spins until pred() holds or the spin time elapses; returns pred().
template <class Pred>
bool spin_until(Pred pred) {
  if (pred()) return true;
  if (spin_time().count() <= 0 || !g_spin.load(std::memory_order_relaxed)) return false;
  const auto deadline = std::chrono::steady_clock::now() + spin_time();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      BRISK_CPU_RELAX();
      if (pred()) return true;
    }
    if (std::chrono::steady_clock::now() > deadline) return pred();
  }
}

// Chunks per thread in a region: enough that a descheduled thread's share is small,
// few enough that claiming (one compare-and-swap on a shared line each) stays cheap.
constexpr uint32_t kChunksPerThread = 4;

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      // Sleep until the generation moves (futex wait on Linux).
      generation_.wait(seen, std::memory_order_acquire);
      continue;  // re-check (spurious wakeups)
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    run_chunks(seen, index);
  }
}

void ThreadPool::run_chunks(uint32_t gen, int thread_index) {
  for (;;) {
    uint64_t t = ticket_.load(std::memory_order_acquire);
    if (static_cast<uint32_t>(t >> 32) != gen) return;  // that region is over
    const uint32_t i = static_cast<uint32_t>(t), nc = n_chunks_.load(std::memory_order_relaxed);
    if (i >= nc) return;  // all claimed
    const auto* fn = job_.load(std::memory_order_relaxed);
    const int64_t n = job_n_.load(std::memory_order_relaxed);
    // Claiming succeeds only while the ticket still names this region and chunk, so the
    // job read above is this region's and its caller is still waiting for chunk i.
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    const int64_t per = n / nc, rem = n % nc;
    const int64_t b = i * per + std::min<int64_t>(i, rem), e = b + per + (i < rem ? 1 : 0);
    if (b < e) (*fn)(b, e, thread_index);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> lk(call_mu_);
  const uint32_t nc = static_cast<uint32_t>(
      std::min<int64_t>(n, static_cast<int64_t>(n_threads_) * kChunksPerThread));
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_.store(&fn, std::memory_order_relaxed);
  job_n_.store(n, std::memory_order_relaxed);
  n_chunks_.store(nc, std::memory_order_relaxed);
  remaining_.store(static_cast<int>(nc), std::memory_order_relaxed);
  ticket_.store(static_cast<uint64_t>(gen) << 32, std::memory_order_release);
  generation_.store(gen, std::memory_order_release);
  generation_.notify_all();  // cheap when nobody sleeps
  run_chunks(gen, 0);
  bool slept = false;
  for (;;) {
    if (spin_until([&] { return remaining_.load(std::memory_order_acquire) == 0; })) break;
    int r = remaining_.load(std::memory_order_acquire);
    if (r == 0) break;
    slept = true;
    remaining_.wait(r, std::memory_order_acquire);
  }
  // On an idle machine the workers finish within the spin; when they often do not, they
  // were descheduled (more runnable threads than cores): stop spinning for a few thousand
  // regions, then try again.
  if (cooldown_ > 0) {
    if (--cooldown_ == 0) g_spin.store(true, std::memory_order_relaxed);
  } else {
    miss_score_ = miss_score_ * 0.875f + (slept ? 1.0f : 0.0f);
    if (miss_score_ > 2.0f) {
      g_spin.store(false, std::memory_order_relaxed);
      cooldown_ = 4000;
      miss_score_ = 0;
    }
  }
}

static std::unique_ptr<ThreadPool>& global_slot() {
  static std::unique_ptr<ThreadPool> pool;
  return pool;
}

ThreadPool& ThreadPool::global() {
  auto& p = global_slot();
  if (!p) p = std::make_unique<ThreadPool>(static_cast<int>(std::thread::hardware_concurrency()));
  return *p;
}

void ThreadPool::set_global_threads(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::thread::hardware_concurrency());
  auto& p = global_slot();
  if (!p || p->size() != n_threads) p = std::make_unique<ThreadPool>(n_threads);
}

}  // namespace brisk
