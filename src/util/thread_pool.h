// A persistent pool of worker threads for data-parallel loops over rows, built for
// per-token latency: a parallel region is published by bumping an atomic generation that
// idle workers spin on for a short while (then sleep on it: a futex, with a timeout), and
// completion is an atomic countdown the caller spins (then sleeps) on. No lock or condition variable is on the
// fast path, so a decode step with ~10 regions per layer pays a few microseconds each.
// A region is cut into two contiguous chunks per thread that threads claim one at a
// time, so a thread the OS has descheduled (a busy machine) delays the region by at most
// one chunk instead of its whole share: the others take its chunks. Which thread computes
// a row never changes the row's result (results do not depend on thread count).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace brisk {

// Whether the caller's wait at the end of a region, after running its own chunks (each
// taking own_chunk on average), counts as a sign of a descheduled worker: the chunks were
// short (under a quarter of the spin) and the wait outlasted the spin plus two of them (the
// other thread may be one chunk into its last claim).
bool region_wait_was_a_miss(std::chrono::nanoseconds wait, std::chrono::nanoseconds own_chunk,
                            std::chrono::nanoseconds spin);

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(begin, end, thread_index) over a partition of [0, n) and waits for all.
  // The calling thread takes part as thread 0. Calls from several threads are serialized.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

  // While one is alive, the regions this thread starts run on it alone (fn(0, n, 0)), on
  // any pool: for a thread that works beside the pool's own regions, e.g. the server's
  // MineDraft-style drafter (engine/batched_draft_model.h).
  // Results do not change: they never depend on the thread count.
  class Serial {
   public:
    Serial();
    ~Serial();
    Serial(const Serial&) = delete;
    Serial& operator=(const Serial&) = delete;
  };

  // The process-wide pool used by kernels; resized by set_global_threads.
  static ThreadPool& global();
  static void set_global_threads(int n_threads);  // <= 0: hardware concurrency

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one parallel region at a time
  // Claims chunks of the current region until none is left; `gen` is the region's
  // generation as the thread saw it (a late thread must not claim from a newer region).
  // Returns how many chunks this thread ran.
  int run_chunks(uint32_t gen, int thread_index);

  // The current region: written by the caller before it publishes the ticket. Atomic
  // because a late worker may read them while the caller writes the next region's; it
  // then fails to claim (the ticket moved) and does not use them.
  std::atomic<const std::function<void(int64_t, int64_t, int)>*> job_{nullptr};
  std::atomic<int64_t> job_n_{0};
  // generation << 32 | chunks << 16 | next chunk: claimed by compare-and-swap
  alignas(64) std::atomic<uint64_t> ticket_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped to start a region
  alignas(64) std::atomic<int> remaining_{0};        // chunks of the region not yet done
  std::atomic<bool> caller_asleep_{false};           // the caller sleeps on remaining_
  alignas(64) std::atomic<int> sleepers_{0};         // workers asleep on generation_
  std::atomic<bool> stop_{false};
  float miss_score_ = 0;  // decaying count of regions whose wait outlasted the spin
  int cooldown_ = 0;      // regions left with spinning off
};

}  // namespace brisk
