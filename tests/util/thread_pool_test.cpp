#include "util/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace brisk {
namespace {

TEST(ThreadPool, EveryIndexExactlyOnceInContiguousChunks) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> calls{0};
      pool.parallel_for(n, [&](int64_t b, int64_t e, int t) {
        EXPECT_LT(b, e);
        EXPECT_GE(t, 0);
        EXPECT_LT(t, threads);
        ++calls;
        for (int64_t i = b; i < e; ++i) ++hits[i];
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n=" << n << " i=" << i;
      EXPECT_LE(calls.load(), 2 * threads);  // two chunks per thread
    }
  }
}

// Inside a Serial scope a region runs as one call on the calling thread; after it, the
// pool splits regions again.
TEST(ThreadPool, SerialScopeRunsRegionsOnTheCaller) {
  ThreadPool pool(3);
  const std::thread::id me = std::this_thread::get_id();
  auto count_calls = [&](bool expect_caller_only) {
    std::atomic<int> calls{0}, covered{0};
    pool.parallel_for(600, [&](int64_t b, int64_t e, int t) {
      ++calls;
      covered += static_cast<int>(e - b);
      if (expect_caller_only) {
        EXPECT_EQ(std::this_thread::get_id(), me);
        EXPECT_EQ(t, 0);
        EXPECT_EQ(b, 0);
        EXPECT_EQ(e, 600);
      }
    });
    EXPECT_EQ(covered.load(), 600);
    return calls.load();
  };
  {
    ThreadPool::Serial serial;
    {
      ThreadPool::Serial nested;
      EXPECT_EQ(count_calls(true), 1);
    }
    EXPECT_EQ(count_calls(true), 1);  // the outer scope still holds
  }
  EXPECT_GT(count_calls(false), 1);  // chunked again
  // Another thread's regions are not affected by this thread's scope.
  ThreadPool::Serial serial;
  std::thread other([&] {
    std::atomic<int> calls{0};
    pool.parallel_for(600, [&](int64_t, int64_t, int) { ++calls; });
    EXPECT_GT(calls.load(), 1);
  });
  other.join();
}

// A thread stuck in its chunk (as if descheduled) must not hold back the rest of the
// region: the other threads claim every other chunk. The caller's chunks take 5 ms each,
// so the worker surely arrives and claims one; that one takes 300 ms, far longer than the
// caller needs for all the others, so the split is decided by the claiming, not a race.
TEST(ThreadPool, OthersTakeTheChunksOfAStuckThread) {
  ThreadPool pool(2);
  std::atomic<int> by_caller{0}, by_worker{0};
  std::atomic<bool> stuck{false};
  pool.parallel_for(8, [&](int64_t, int64_t, int t) {
    if (t != 0 && !stuck.exchange(true)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ++by_worker;
      return;
    }
    if (t == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    (t == 0 ? by_caller : by_worker)++;
  });
  ASSERT_TRUE(stuck.load());
  EXPECT_EQ(by_worker.load(), 1);
  EXPECT_EQ(by_caller.load(), 3);  // the region's other chunks (two a thread, 4 in all)
}

// Regions of changing chunk counts, back to back, on 16 threads: every index runs exactly
// once per region. A worker holding a spent ticket of the previous region once claimed a
// chunk of the next (it read the new chunk count before the new ticket was published): a
// chunk ran twice and the countdown of a later region never reached zero, a hang seen on
// a 16-core machine. (The window is nanoseconds: on 2 cores this rarely hits it.)
TEST(ThreadPool, ChangingRegionsOnMoreThreadsThanCores) {
  ThreadPool pool(16);
  std::vector<std::atomic<int>> hits(64);
  for (int rep = 0; rep < 3000; ++rep) {
    const int64_t n = 1 + (rep * 37) % 64;
    for (int64_t i = 0; i < n; ++i) hits[i] = 0;
    pool.parallel_for(n, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) {
        ++hits[i];
        for (volatile int w = 0; w < 300; ++w) {}  // a little work, so workers take part
      }
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "region " << rep << " n " << n << " i " << i;
  }
}

TEST(ThreadPool, ReusableManyTimes) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 2000; ++rep)
    pool.parallel_for(10, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
  EXPECT_EQ(sum.load(), 2000 * 45);
}

// Only short chunks followed by a long wait count: a worker one long chunk behind (a
// prefill matmul's chunk takes milliseconds, a packing chunk can stall on a page fault) is
// not a sign of a descheduled worker.
TEST(ThreadPool, LongChunksAreNotMistakenForOversubscription) {
  using std::chrono::microseconds;
  const microseconds spin(200);
  EXPECT_TRUE(region_wait_was_a_miss(microseconds(4000), microseconds(10), spin));
  EXPECT_TRUE(region_wait_was_a_miss(microseconds(300), microseconds(40), spin));
  EXPECT_FALSE(region_wait_was_a_miss(microseconds(150), microseconds(5), spin));  // within the spin
  EXPECT_FALSE(region_wait_was_a_miss(microseconds(3300), microseconds(186), spin));
  EXPECT_FALSE(region_wait_was_a_miss(microseconds(1500), microseconds(1000), spin));
}

}  // namespace
}  // namespace brisk
