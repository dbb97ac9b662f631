#include "util/thread_pool.h"

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

void run_chunk(const std::function<void(int64_t, int64_t, int)>& fn, int64_t n, int nt, int i) {
  int64_t per = n / nt, rem = n % nt;
  int64_t b = i * per + (i < rem ? i : rem);
  int64_t e = b + per + (i < rem ? 1 : 0);
  if (b < e) fn(b, e, i);
}

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
    run_chunk(*job_, job_n_, n_threads_, index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> lk(call_mu_);
  job_ = &fn;
  job_n_ = n;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes job_, job_n_, pending_
  generation_.notify_all();  // cheap when nobody sleeps (no futex waiters: no syscall?)
  run_chunk(fn, n, n_threads_, 0);
  bool slept = false;
  for (;;) {
    if (spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) break;
    int p = pending_.load(std::memory_order_acquire);
    if (p == 0) break;
    slept = true;
    pending_.wait(p, std::memory_order_acquire);
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
