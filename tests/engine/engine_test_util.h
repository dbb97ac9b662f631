// Helpers for engine tests: the bundled models, and running requests to completion.
#pragma once
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <chrono>
#include <vector>

#include "engine/engine.h"
#include "engine/loaded_model.h"

namespace brisk::test {

inline LoadedModel& tiny_model() {
  static LoadedModel m = load_for_generation(BRISK_SOURCE_DIR "/models/brisk-tiny-q8_0.gguf");
  return m;
}
inline LoadedModel& nano_model() {
  static LoadedModel m = load_for_generation(BRISK_SOURCE_DIR "/tests/fixtures/brisk-nano");
  return m;
}

// Everything a request streamed, gathered.
struct Collected {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  int n_events = 0;
  bool done = false;
  StreamEvent last;
};

// Collects the events of many requests; wait() blocks until all finished.
class Collector {
 public:
  explicit Collector(size_t n) : results_(n) {}
  std::function<void(const StreamEvent&)> callback(size_t i) {
    return [this, i](const StreamEvent& ev) {
      std::lock_guard<std::mutex> lk(mu_);
      Collected& c = results_[i];
      EXPECT_FALSE(c.done) << "event after done";
      c.text += ev.text;
      c.tokens.insert(c.tokens.end(), ev.tokens.begin(), ev.tokens.end());
      c.logprobs.insert(c.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
      c.top_logprobs.insert(c.top_logprobs.end(), ev.top_logprobs.begin(), ev.top_logprobs.end());
      ++c.n_events;
      if (ev.done) {
        c.done = true;
        c.last = ev;
        ++n_done_;
        cv_.notify_all();
      }
    };
  }
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return n_done_ == results_.size(); });
  }
  const Collected& operator[](size_t i) const { return results_[i]; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Collected> results_;
  size_t n_done_ = 0;
};

inline Collected run_one(Engine& e, const CompletionRequest& r) {
  Collector c(1);
  e.submit(r, c.callback(0));
  c.wait();
  return c[0];
}

inline SamplingParams greedy() {
  SamplingParams p;
  p.temperature = 0;
  return p;
}

// Waits until the engine thread published metrics with nothing running or queued.
inline EngineMetrics settled_metrics(const Engine& e) {
  for (int i = 0; i < 2000; ++i) {
    EngineMetrics m = e.metrics();
    if (m.running == 0 && m.queue_depth == 0 && m.kv_blocks_used == 0) return m;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return e.metrics();
}

}  // namespace brisk::test
