#include "serve/response_events.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include <fmt/format.h>

namespace brisk::serve {

namespace {

constexpr size_t kHubWriteBytes = 2048;  // a write, unless one event alone is larger

// Sends what the socket takes now of data[*off..], never blocking (MSG_DONTWAIT: the hub
// does not ask poll() first, one system call a token fewer); false when the peer is gone.
bool send_now(int fd, const std::string& data, size_t* off) {
  while (*off < data.size()) {
    const ssize_t n = send(fd, data.data() + *off, data.size() - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      *off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

}  // namespace

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

bool ResponseEvents::write_unsent(int fd, std::chrono::milliseconds timeout, bool* ends) {
  std::string rest;
  {
    std::lock_guard lk(mu_);
    rest.swap(unsent_);
    *ends = unsent_ends_;
  }
  for (size_t off = 0;;) {
    if (!send_now(fd, rest, &off)) return false;
    if (off == rest.size()) return true;
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) return false;  // a client that reads nothing
  }
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

void ResponseEvents::write_pending() {
  {
    std::lock_guard lk(mu_);
    queued_ = false;
    if (!hub_) return;  // handed back or over since it was queued
  }
  // A few events at a time, each batch framed as one HTTP/1.1 chunk (size in hex, CRLF,
  // data, CRLF: the framing of the chunked response httplib started; it never compresses
  // text/event-stream) and sent on the socket directly: the DataSink's write polls it twice
  // first. What a client that stopped reading does not take is handed back with the stream
  // (write_unsent), so this thread never blocks, and neither does every other stream.
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (events_.empty()) return;
    }
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
    const std::string chunk = fmt::format("{:x}\r\n{}\r\n", out.size(), out);
    size_t sent = 0;
    if (!send_now(fd_, chunk, &sent)) return end_hub(HubResult::kGone);
    if (sent < chunk.size()) {
      {
        std::lock_guard lk(mu_);
        unsent_ = chunk.substr(sent);
        unsent_ends_ = fin;
      }
      return end_hub(HubResult::kHandedBack);
    }
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
