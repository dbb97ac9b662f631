#include "util/thread_pool.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
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

// Sleeping and waking on a 32-bit atomic through the futex system call, with a timeout:
// a wake-up that got lost (however that might happen) then costs a few milliseconds
// instead of a hang. Only called when the sleeper said so (see sleepers_, caller_asleep_),
// so a region on an idle-free pool makes no system call.
template <class T>
void futex_wait(std::atomic<T>& a, T expected, long timeout_ns) {
  static_assert(sizeof(std::atomic<T>) == 4, "futexes are 32-bit");
  timespec ts{timeout_ns / 1000000000, timeout_ns % 1000000000};
  syscall(SYS_futex, reinterpret_cast<int*>(&a), FUTEX_WAIT_PRIVATE, static_cast<int>(expected), &ts,
          nullptr, 0);
}
template <class T>
void futex_wake(std::atomic<T>& a, int n) {
  syscall(SYS_futex, reinterpret_cast<int*>(&a), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

// Chunks per thread in a region: enough that a descheduled or slower thread's share can
// go to the others, few enough that claiming stays cheap: each claim and each completion
// moves a shared cache line between cores, which on a mesh-connected Xeon costs more than
// the compute of a small region's chunk. brisk-tiny decode with 2 threads, 4 -> 2 (forward
// passes alternated in one process, 5 runs): 1 sequence 2-9% faster, 16 sequences 2% by the
// median; 1 a thread was faster at 16 (4-8%) but leaves no share to hand over.
constexpr uint32_t kChunksPerThread = 2;

}  // namespace

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(generation_, INT_MAX);
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker(int index) {
  uint32_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      // Sleep until the generation moves. Announced first (sequentially consistent on both
      // sides), so the caller that moves it either sees a sleeper and wakes it, or moved it
      // before this thread's check below and the futex does not sleep.
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (generation_.load(std::memory_order_seq_cst) == seen) futex_wait(generation_, seen, 50'000'000);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      continue;  // re-check (timeouts, spurious wakeups)
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    run_chunks(seen, index);
  }
}

int ThreadPool::run_chunks(uint32_t gen, int thread_index) {
  int ran = 0;
  for (;;) {
    uint64_t t = ticket_.load(std::memory_order_acquire);
    if (static_cast<uint32_t>(t >> 32) != gen) return ran;  // that region is over
    // The chunk count comes with the ticket: read from elsewhere it could already be the
    // next region's (its caller writes it before the new ticket), making a spent ticket
    // look claimable.
    const uint32_t nc = static_cast<uint32_t>(t >> 16) & 0xffff, i = static_cast<uint32_t>(t) & 0xffff;
    if (i >= nc) return ran;  // all claimed
    const auto* fn = job_.load(std::memory_order_relaxed);
    const int64_t n = job_n_.load(std::memory_order_relaxed);
    // Claiming succeeds only while the ticket still names this region and chunk; the
    // region is then unfinished, so the job read above is this region's and its caller is
    // still waiting for chunk i.
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    const int64_t per = n / nc, rem = n % nc;
    const int64_t b = i * per + std::min<int64_t>(i, rem), e = b + per + (i < rem ? 1 : 0);
    if (b < e) (*fn)(b, e, thread_index);
    ++ran;
    if (remaining_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        caller_asleep_.load(std::memory_order_seq_cst))
      futex_wake(remaining_, 1);
  }
}

namespace {
thread_local int serial_depth = 0;  // ThreadPool::Serial objects alive on this thread
}  // namespace

ThreadPool::Serial::Serial() { ++serial_depth; }
ThreadPool::Serial::~Serial() { --serial_depth; }

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (n_threads_ == 1 || n == 1 || serial_depth > 0) {
    fn(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> lk(call_mu_);
  const uint32_t nc = static_cast<uint32_t>(
      std::min<int64_t>({n, static_cast<int64_t>(n_threads_) * kChunksPerThread, 0xffff}));
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_.store(&fn, std::memory_order_relaxed);
  job_n_.store(n, std::memory_order_relaxed);
  remaining_.store(static_cast<int>(nc), std::memory_order_relaxed);
  ticket_.store(static_cast<uint64_t>(gen) << 32 | static_cast<uint64_t>(nc) << 16, std::memory_order_release);
  generation_.store(gen, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake(generation_, INT_MAX);
  const auto t0 = std::chrono::steady_clock::now();
  const int own = run_chunks(gen, 0);
  const auto t1 = std::chrono::steady_clock::now();
  bool slept = false;
  if (!spin_until([&] { return remaining_.load(std::memory_order_acquire) == 0; })) {
    // The chunks other threads claimed are still running: sleep until the last one ends
    // (it wakes this thread when it sees caller_asleep_; the timeout is a safety net).
    caller_asleep_.store(true, std::memory_order_seq_cst);
    for (int r; (r = remaining_.load(std::memory_order_seq_cst)) != 0;) {
      slept = true;
      futex_wait(remaining_, r, 5'000'000);
    }
    caller_asleep_.store(false, std::memory_order_relaxed);
  }
  // On an idle machine the workers finish within the spin; when they often do not, they
  // were descheduled (more runnable threads than cores): stop spinning for a few thousand
  // regions, then try again. Only regions of short chunks count: spinning is what makes them
  // fast, while around long chunks (a prefill's matmuls, packing weights at load, where a
  // worker's chunk can stall milliseconds on a huge-page fault) it hardly matters. Counting
  // those turned spinning off for the first decode steps after a load or a long prompt
  // (brisk-small pp1 at depth 128: ~330 instead of ~520 tok/s in about half the runs).
  if (cooldown_ > 0) {
    if (--cooldown_ == 0) g_spin.store(true, std::memory_order_relaxed);
  } else {
    const bool miss = slept && region_wait_was_a_miss(std::chrono::steady_clock::now() - t1,
                                                      (t1 - t0) / std::max(own, 1), spin_time());
    miss_score_ = miss_score_ * 0.875f + (miss ? 1.0f : 0.0f);
    if (miss_score_ > 2.0f) {
      g_spin.store(false, std::memory_order_relaxed);
      cooldown_ = 4000;
      miss_score_ = 0;
    }
  }
}

bool region_wait_was_a_miss(std::chrono::nanoseconds wait, std::chrono::nanoseconds own_chunk,
                            std::chrono::nanoseconds spin) {
  return own_chunk * 4 < spin && wait > spin + 2 * own_chunk;
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
