// A request's events on their way from the engine thread to the client.
//
// Every HTTP request has a thread of its own (cpp-httplib). Waking that thread for each
// token cost more than writing the token: a decode step of 16 streams woke 16 threads, each
// a futex call, an inter-processor interrupt and a context switch taking a core from the
// computing threads. So a stream's events go to one StreamHub thread, woken once for a
// burst of events (the engine emits a step's tokens together), which writes each stream's
// chunk to its socket; the request threads sleep until their stream ends. Measured in
// session 20 (brisk-tiny, 2 cores, bench/serve-bench.sh alternated with the previous
// binary): 16 streams 8-17% more tokens/s, one stream 5-13%. A client whose
// socket would block gets its stream handed back to its own thread, so that one slow
// reader cannot stall the others. Whole (non-streaming) answers wait on their own thread.
#pragma once
#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace brisk::serve {

class StreamHub;

class ResponseEvents : public std::enable_shared_from_this<ResponseEvents> {
 public:
  // The writer (the hub, or the request's thread) is woken for the first event, the last,
  // and whenever `wake_every` are waiting (ServerOptions::stream_interval: N chunks in one
  // write, SGLang's --stream-interval); wake_every 0 (a whole answer): for the last event
  // only. A request thread's take() also returns at its timeout with what there is.
  explicit ResponseEvents(size_t wake_every) : wake_every_(wake_every) {}

  // The engine thread's callback.
  void push(const StreamEvent& ev);
  // Waits up to `timeout` for events worth waking for, and takes all there are.
  std::deque<StreamEvent> take(std::chrono::milliseconds timeout);
  // Whether the engine sent the last event.
  bool finished();

  // Called from a streaming response's content provider: the hub writes this stream's
  // events (each through `format`) to `sink`, whose connection's socket is `fd`, until
  // the last one (kDone, the stream is closed), a failed write (kGone), or a socket that
  // would block (kHandedBack: the caller goes on with take()). Blocks until then.
  enum class HubResult { kDone, kGone, kHandedBack };
  HubResult write_through(StreamHub& hub, httplib::DataSink& sink, int fd,
                          std::function<std::string(const StreamEvent&)> format);
  // After kHandedBack: writes the bytes of the hub's last chunk that the socket did not
  // take, waiting up to `timeout` at a time for it to take more; false when the client is
  // gone or reads nothing for that long. *ends: that chunk held the last event (the caller
  // then ends the response).
  bool write_unsent(int fd, std::chrono::milliseconds timeout, bool* ends);

 private:
  friend class StreamHub;
  bool ready() const;  // worth waking for (mu_ held)
  void write_pending();  // on the hub's thread
  void end_hub(HubResult r);

  const size_t wake_every_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_;
  size_t taken_ = 0;   // events handed out so far
  bool done_ = false;  // the engine sent the last event
  // While the hub writes this stream (all under mu_ but what only the hub's thread uses):
  StreamHub* hub_ = nullptr;
  bool queued_ = false;  // in the hub's list of streams to write
  bool hub_over_ = false;
  HubResult result_ = HubResult::kHandedBack;
  std::string unsent_;        // a handed-back stream's partly written chunk, framed
  bool unsent_ends_ = false;  // it held the last event
  httplib::DataSink* sink_ = nullptr;  // the hub's thread only
  int fd_ = -1;
  std::function<std::string(const StreamEvent&)> format_;
};

class StreamHub {
 public:
  StreamHub();
  ~StreamHub();  // after every stream's request thread returned
  StreamHub(const StreamHub&) = delete;
  StreamHub& operator=(const StreamHub&) = delete;

  // `r` has events for its client.
  void ready(std::shared_ptr<ResponseEvents> r);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<ResponseEvents>> ready_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace brisk::serve
