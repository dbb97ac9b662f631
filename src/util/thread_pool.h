// A persistent pool of worker threads for data-parallel loops over rows.
// Work is split into contiguous, equal chunks by index, so which thread computes
// which row never changes the result of a row (results do not depend on thread count).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace brisk {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(begin, end, thread_index) over a partition of [0, n) and waits for all.
  // The calling thread takes part as thread 0.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t, int)>& fn);

  // The process-wide pool used by kernels; resized by set_global_threads.
  static ThreadPool& global();
  static void set_global_threads(int n_threads);  // <= 0: hardware concurrency

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t, int)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace brisk
