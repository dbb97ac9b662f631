#include "serve/response_events.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include <fmt/format.h>

namespace brisk::serve {

bool ResponseEvents::ready() const {
  if (wake_every_ == 0) return done_;
  return !events_.empty() && (done_ || taken_ == 0 || events_.size() >= wake_every_);
}

void ResponseEvents::push(const StreamEvent& ev) {
  StreamHub* hub = nullptr;
  bool wake = false;
  {
    std::lock_guard lk(mu_);
    events_.push_back(ev);
    if (ev.done) done_ = true;
    if (hub_ && !queued_ && ready()) {
      queued_ = true;
      hub = hub_;
    } else if (!hub_) {
      wake = ready();
    }
  }
  if (hub) hub->ready(shared_from_this());
  else if (wake) cv_.notify_one();  // one waiter: the request's thread
}

std::deque<StreamEvent> ResponseEvents::take(std::chrono::milliseconds timeout) {
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return ready(); });
  std::deque<StreamEvent> out;
  out.swap(events_);
  taken_ += out.size();
  return out;
}

bool ResponseEvents::finished() {
  std::lock_guard lk(mu_);
  return done_;
}

ResponseEvents::HubResult ResponseEvents::write_through(StreamHub& hub, httplib::DataSink& sink, int fd,
                                                        std::function<std::string(const StreamEvent&)> format) {
  bool queue = false;
  {
    std::lock_guard lk(mu_);
    sink_ = &sink;
    fd_ = fd;
    format_ = std::move(format);
    hub_ = &hub;
    hub_over_ = false;
    queue = ready();
    queued_ = queue;
  }
  if (queue) hub.ready(shared_from_this());
  std::unique_lock lk(mu_);
  cv_.wait(lk, [&] { return hub_over_; });
  return result_;
}

void ResponseEvents::end_hub(HubResult r) {
  {
    std::lock_guard lk(mu_);
    hub_ = nullptr;
    queued_ = false;
    result_ = r;
    hub_over_ = true;
  }
  cv_.notify_one();
}

namespace {

// Whether the socket takes data now. Linux reports POLLOUT on a TCP socket while a third of
// its send buffer (at least ~5 KB with the default 16 KB) is free, so a write of up to
// kHubWriteBytes then never blocks.
bool takes_data_now(int fd) {
  pollfd p{fd, POLLOUT, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & POLLOUT);
}
constexpr size_t kHubWriteBytes = 2048;  // a write, unless one event alone is larger

// Writes `data` as one HTTP/1.1 chunk (size in hex, CRLF, data, CRLF: the framing of the
// chunked response httplib started; it never compresses text/event-stream). Not through the
// DataSink: its write polls the socket twice more (writable, and still open) before its
// send, three system calls a streamed token that cost the computing threads their cores.
// A peer that closed shows as a failed send one write later instead. The socket is
// blocking, but after takes_data_now() a write this small does not block.
bool send_chunk(int fd, const std::string& data) {
  const std::string chunk = fmt::format("{:x}\r\n{}\r\n", data.size(), data);
  for (size_t off = 0; off < chunk.size();) {
    const ssize_t n = send(fd, chunk.data() + off, chunk.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

void ResponseEvents::write_pending() {
  {
    std::lock_guard lk(mu_);
    queued_ = false;
    if (!hub_) return;  // handed back or over since it was queued
  }
  // A few events at a time, each batch only when the socket takes it without blocking: a
  // client that stopped reading would otherwise block this thread, and every stream with
  // it. Events are taken only once they can be written, so a stream handed back leaves
  // nothing formatted behind.
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (events_.empty()) return;
    }
    if (!takes_data_now(fd_)) return end_hub(HubResult::kHandedBack);
    std::string out;
    bool fin = false;
    try {
      while (out.size() < kHubWriteBytes) {
        StreamEvent ev;
        {
          std::lock_guard lk(mu_);
          if (events_.empty()) break;
          ev = std::move(events_.front());
          events_.pop_front();
          ++taken_;
        }
        out += format_(ev);
        fin = fin || ev.done;
      }
    } catch (const std::exception&) {
      return end_hub(HubResult::kGone);  // the request is cancelled
    }
    // (Never write 0 bytes: a chunk of size 0 ends the stream.)
    if (out.empty()) return;
    if (!send_chunk(fd_, out)) return end_hub(HubResult::kGone);
    if (fin) {
      sink_->done();
      return end_hub(HubResult::kDone);
    }
  }
}

StreamHub::StreamHub() : thread_([this] { loop(); }) {}

StreamHub::~StreamHub() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void StreamHub::ready(std::shared_ptr<ResponseEvents> r) {
  bool wake;
  {
    std::lock_guard lk(mu_);
    wake = ready_.empty();  // else the hub is already due to look
    ready_.push_back(std::move(r));
  }
  if (wake) cv_.notify_one();
}

void StreamHub::loop() {
  std::vector<std::shared_ptr<ResponseEvents>> work;
  for (;;) {
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !ready_.empty(); });
      if (ready_.empty()) return;  // stopping
      work.swap(ready_);
    }
    for (const auto& r : work) r->write_pending();
    work.clear();
  }
}

}  // namespace brisk::serve
