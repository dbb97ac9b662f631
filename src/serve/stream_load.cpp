#include "serve/stream_load.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string_view>

#include "util/error.h"

namespace brisk {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

constexpr auto kConnectTimeout = std::chrono::seconds(10);
constexpr auto kReadTimeout = std::chrono::seconds(600);  // no byte for this long: the request failed

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), s.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         });
}

// One connection and the request on it. The response is parsed as it arrives: status line,
// headers, then a chunked, fixed-length or read-to-close body, whose bytes (200: server-sent
// events) are handed on as they come.
struct Conn {
  enum class Phase { kStatus, kHeaders, kChunkSize, kChunkData, kChunkEnd, kTrailers, kLength, kUntilClose, kDone };
  int fd = -1;
  bool busy = false;
  std::string out;  // the request
  size_t sent = 0;
  std::string in;   // received, not yet parsed
  Phase phase = Phase::kStatus;
  int status = 0;
  bool chunked = false, has_length = false, close_after = false;
  int64_t left = 0;        // of the current chunk or of a Content-Length body
  std::string events;      // body bytes not yet split into events
  std::string error_body;  // the first bytes of an answer other than 200
  StreamSample s;
  Clock::time_point t0, first, prev, last_io;
  int tokens_seen = 0;
  bool got_done = false;  // data: [DONE]
  std::string last_finish;
};

class Loop {
 public:
  explicit Loop(const StreamLoad& load) : load_(load), conns_(static_cast<size_t>(load.concurrency)) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    const int rc = getaddrinfo(load.host.c_str(), std::to_string(load.port).c_str(), &hints, &addr_);
    if (rc != 0) fail("cannot resolve {}: {}", load.host, gai_strerror(rc));
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) fail("epoll_create1: {}", std::strerror(errno));
  }
  ~Loop() {
    for (Conn& c : conns_)
      if (c.fd >= 0) close(c.fd);
    if (ep_ >= 0) close(ep_);
    freeaddrinfo(addr_);
  }

  std::vector<StreamSample> run(double* wall_s) {
    const int total = load_.duration_s > 0 ? INT_MAX : load_.requests;
    std::mt19937_64 rng(load_.seed);
    std::exponential_distribution<double> gap(load_.rate > 0 ? load_.rate : 1.0);
    double next_arrival = load_.rate > 0 ? gap(rng) : 0;  // seconds from the start
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(load_.duration_s));
    int next = 0, in_flight = 0;  // in_flight: busy connections (a request each)
    std::vector<epoll_event> evs(64);
    for (;;) {
      Clock::time_point now = Clock::now();
      const bool more = next < total && !(load_.duration_s > 0 && now >= deadline);
      // Send what is due on idle connections (a request that fails at once frees its
      // connection for the next one).
      const auto due = [&] {
        return load_.rate <= 0 || now >= start + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(next_arrival));
      };
      for (size_t i = 0; more && i < conns_.size(); ++i)
        while (!conns_[i].busy && next < total && due()) {
          if (load_.rate > 0) next_arrival += gap(rng);
          begin(static_cast<int>(i), next++);
        }
      in_flight = busy_count();
      if (in_flight == 0 && !(next < total && !(load_.duration_s > 0 && Clock::now() >= deadline))) break;
      int timeout_ms = 1000;  // wakes for the read timeout at least once a second
      if (more && load_.rate > 0 && in_flight < load_.concurrency) {
        const double wait = next_arrival - seconds(Clock::now() - start);
        timeout_ms = std::clamp(static_cast<int>(wait * 1000) + 1, 0, timeout_ms);
      }
      if (load_.duration_s > 0 && more)
        timeout_ms = std::min(timeout_ms, static_cast<int>(std::max(0.0, seconds(deadline - Clock::now())) * 1000) + 1);
      const int n = epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), in_flight > 0 || more ? timeout_ms : 0);
      if (n < 0 && errno != EINTR) fail("epoll_wait: {}", std::strerror(errno));
      for (int k = 0; k < n; ++k) {
        Conn& c = conns_[evs[static_cast<size_t>(k)].data.u32];
        if (c.fd < 0) continue;
        if (evs[static_cast<size_t>(k)].events & EPOLLOUT) flush(c);
        if (c.fd >= 0 && (evs[static_cast<size_t>(k)].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) receive(c);
        if (!c.busy && c.fd >= 0 && c.close_after) drop(c);
      }
      now = Clock::now();
      for (Conn& c : conns_)
        if (c.busy && now - c.last_io > kReadTimeout) failed(c, "transport: no answer for 600 s");
      in_flight = busy_count();
    }
    *wall_s = seconds(Clock::now() - start);
    return std::move(samples_);
  }

 private:
  int busy_count() const {
    return static_cast<int>(std::count_if(conns_.begin(), conns_.end(), [](const Conn& c) { return c.busy; }));
  }

  // Starts request i on connection ci (connecting first if needed); a failure to connect
  // or send is that request's error sample.
  void begin(int ci, int i) {
    Conn& c = conns_[static_cast<size_t>(ci)];
    if (c.fd < 0 && !connect_to(c, ci)) return;
    const std::string body = load_.body(i);
    c.out = "POST " + load_.path + " HTTP/1.1\r\nHost: " + load_.host + ":" + std::to_string(load_.port) +
            "\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n";
    if (!load_.api_key.empty()) c.out += "Authorization: Bearer " + load_.api_key + "\r\n";
    c.out += "\r\n" + body;
    c.sent = 0;
    c.in.clear();
    c.phase = Conn::Phase::kStatus;
    c.status = 0;
    c.chunked = c.has_length = c.close_after = false;
    c.left = 0;
    c.events.clear();
    c.error_body.clear();
    c.s = StreamSample{};
    c.tokens_seen = 0;
    c.got_done = false;
    c.last_finish.clear();
    c.busy = true;
    c.t0 = c.last_io = Clock::now();
    flush(c);
  }

  bool connect_to(Conn& c, int ci) {
    std::string why = "no address";
    for (addrinfo* a = addr_; a; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        why = std::strerror(errno);
        continue;
      }
      int err = 0;
      if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
        err = errno;
        if (err == EINPROGRESS) {
          pollfd p{fd, POLLOUT, 0};
          const int r = poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kConnectTimeout).count()));
          socklen_t len = sizeof err;
          if (r == 1) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
          else err = r == 0 ? ETIMEDOUT : errno;
        }
      }
      if (err != 0) {
        why = std::strerror(err);
        close(fd);
        continue;
      }
      const int one = 1;  // the request's header and body in one segment, no delayed-ACK wait
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.u32 = static_cast<uint32_t>(ci);
      if (epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &e) < 0) fail("epoll_ctl: {}", std::strerror(errno));
      c.fd = fd;
      return true;
    }
    StreamSample s;
    s.error = "transport: cannot connect to " + load_.host + ":" + std::to_string(load_.port) + ": " + why;
    samples_.push_back(std::move(s));
    return false;
  }

  void drop(Conn& c) {
    close(c.fd);  // also leaves the epoll set
    c.fd = -1;
  }

  // Writes what the socket takes of the request; waits for writability for the rest.
  void flush(Conn& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      failed(c, std::string("transport: send: ") + std::strerror(errno));
      return;
    }
    epoll_event e{};
    e.events = c.sent < c.out.size() ? EPOLLIN | EPOLLOUT : EPOLLIN;
    e.data.u32 = static_cast<uint32_t>(&c - conns_.data());
    epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &e);
  }

  void receive(Conn& c) {
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
      if (n > 0) {
        c.last_io = Clock::now();
        if (!c.busy) continue;  // bytes nobody asked for: ignored
        c.in.append(buf, static_cast<size_t>(n));
        if (!parse(c)) return;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      // The peer closed (n == 0) or the connection broke.
      const std::string why = n == 0 ? "connection closed by the server" : std::strerror(errno);
      if (c.busy && c.phase == Conn::Phase::kUntilClose) {
        c.phase = Conn::Phase::kDone;
        finish(c);
        return drop(c);
      }
      if (c.busy) failed(c, "transport: " + why);  // (drops the connection)
      else drop(c);
      return;
    }
  }

  // Parses what arrived; false when the request ended with an error (the connection is
  // dropped then).
  bool parse(Conn& c) {
    using P = Conn::Phase;
    size_t pos = 0;
    auto line = [&](std::string_view* out) {  // the next CRLF-terminated line, if whole
      const size_t end = c.in.find("\r\n", pos);
      if (end == std::string::npos) return false;
      *out = std::string_view(c.in).substr(pos, end - pos);
      pos = end + 2;
      return true;
    };
    std::string_view l;
    while (c.busy && c.phase != P::kDone) {
      if (c.phase == P::kStatus) {
        if (!line(&l)) break;
        if (!starts_with_nocase(l, "HTTP/1.") || l.size() < 12) return failed(c, "bad status line '" + std::string(l.substr(0, 80)) + "'");
        c.status = std::atoi(std::string(l.substr(9, 3)).c_str());
        c.phase = P::kHeaders;
      } else if (c.phase == P::kHeaders) {
        if (!line(&l)) break;
        if (l.empty()) {
          c.phase = c.chunked ? P::kChunkSize : !c.has_length ? P::kUntilClose : c.left > 0 ? P::kLength : P::kDone;
          if (c.phase == P::kDone) finish(c);
        } else if (starts_with_nocase(l, "transfer-encoding:") && l.find("chunked") != std::string_view::npos) {
          c.chunked = true;
        } else if (starts_with_nocase(l, "content-length:")) {
          c.left = std::atoll(std::string(l.substr(15)).c_str());
          c.has_length = true;
          if (c.left < 0) return failed(c, "bad Content-Length '" + std::string(l.substr(15, 40)) + "'");
        } else if (starts_with_nocase(l, "connection:") && l.find("close") != std::string_view::npos) {
          c.close_after = true;
        }
      } else if (c.phase == P::kChunkSize) {
        if (!line(&l)) break;
        char* end = nullptr;
        const std::string hex(l.substr(0, l.find(';')));
        c.left = std::strtoll(hex.c_str(), &end, 16);
        if (hex.empty() || *end != '\0' || c.left < 0) return failed(c, "bad chunk size '" + hex.substr(0, 40) + "'");
        c.phase = c.left == 0 ? P::kTrailers : P::kChunkData;
      } else if (c.phase == P::kChunkData || c.phase == P::kLength || c.phase == P::kUntilClose) {
        const size_t avail = c.in.size() - pos;
        if (avail == 0) break;
        const size_t take = c.phase == P::kUntilClose ? avail : std::min<size_t>(avail, static_cast<size_t>(c.left));
        if (!body(c, std::string_view(c.in).substr(pos, take))) return false;
        pos += take;
        if (c.phase == P::kUntilClose) continue;
        c.left -= static_cast<int64_t>(take);
        if (c.left == 0) {
          c.phase = c.phase == P::kChunkData ? P::kChunkEnd : P::kDone;
          if (c.phase == P::kDone) finish(c);
        }
      } else if (c.phase == P::kChunkEnd) {
        if (!line(&l)) break;
        if (!l.empty()) return failed(c, "chunk not followed by CRLF");
        c.phase = P::kChunkSize;
      } else if (c.phase == P::kTrailers) {
        if (!line(&l)) break;
        if (l.empty()) {
          c.phase = P::kDone;
          finish(c);
        }
      }
    }
    c.in.erase(0, pos);
    return true;
  }

  // Body bytes: a 200 answer's server-sent events, one by one; else the error's text.
  bool body(Conn& c, std::string_view data) {
    if (c.status != 200) {
      c.error_body.append(data.substr(0, std::min<size_t>(data.size(), 200 - std::min<size_t>(200, c.error_body.size()))));
      return true;
    }
    c.events.append(data);
    size_t from = 0;
    for (size_t end; (end = c.events.find("\n\n", from)) != std::string::npos; from = end + 2) {
      const std::string_view ev = std::string_view(c.events).substr(from, end - from);
      if (ev.substr(0, 6) != "data: ") continue;
      const std::string_view payload = ev.substr(6);
      if (payload == "[DONE]") {
        c.got_done = true;
        continue;
      }
      json j = json::parse(payload, nullptr, false);
      if (j.is_discarded()) return failed(c, "unparsable SSE chunk");
      if (j.contains("error")) {
        c.s.error = j["error"].is_object() ? j["error"].value("message", "error chunk") : "error chunk";
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        const json& u = j["usage"];
        c.s.completion_tokens = u.value("completion_tokens", 0);
        c.s.prompt_tokens = u.value("prompt_tokens", 0);
        if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
          c.s.cached_tokens = u["prompt_tokens_details"].value("cached_tokens", 0);
      }
      if (!j.contains("choices") || !j["choices"].is_array()) continue;
      for (const json& ch : j["choices"]) {
        if (!ch.is_object()) continue;
        const int k = ch.contains("tokens") && ch["tokens"].is_array() ? static_cast<int>(ch["tokens"].size())
                      : ch.contains("text") && ch["text"].is_string() && !ch["text"].get_ref<const std::string&>().empty() ? 1
                                                                                                                : 0;
        if (k > 0) {
          const Clock::time_point now = Clock::now();
          if (c.tokens_seen == 0) c.first = now;
          else c.s.itl.push_back(seconds(now - c.prev));
          c.prev = now;
          c.tokens_seen += k;
        }
        if (ch.contains("finish_reason") && ch["finish_reason"].is_string())
          c.last_finish = ch["finish_reason"].get<std::string>();
      }
    }
    c.events.erase(0, from);
    return true;
  }

  // The response is complete: its sample.
  void finish(Conn& c) {
    c.busy = false;
    StreamSample& s = c.s;
    if (c.status != 200) {
      s.error = "HTTP " + std::to_string(c.status) + " " + c.error_body;
    } else if (s.error.empty()) {
      if (!c.got_done) s.error = "stream ended without [DONE]";
      else if (c.last_finish.empty()) s.error = "no finish_reason";
      else if (c.tokens_seen == 0) s.error = "no tokens";
    }
    if (s.error.empty()) {
      if (s.completion_tokens == 0) s.completion_tokens = c.tokens_seen;
      s.ok = true;
      s.latency = seconds(Clock::now() - c.t0);
      s.ttft = seconds(c.first - c.t0);
      s.tpot = s.completion_tokens > 1 ? seconds(c.prev - c.first) / (s.completion_tokens - 1) : 0;
    }
    samples_.push_back(std::move(s));
  }

  // The request failed: its sample, and the connection is closed (the next request on
  // this slot connects anew).
  bool failed(Conn& c, std::string why) {
    c.busy = false;
    c.s.ok = false;
    c.s.error = std::move(why);
    samples_.push_back(std::move(c.s));
    drop(c);
    return false;
  }

  const StreamLoad& load_;
  addrinfo* addr_ = nullptr;
  int ep_ = -1;
  std::vector<Conn> conns_;
  std::vector<StreamSample> samples_;
};

}  // namespace

std::vector<StreamSample> run_stream_load(const StreamLoad& load, double* wall_s) {
  if (load.concurrency < 1) fail("concurrency must be >= 1, got {}", load.concurrency);
  Loop loop(load);
  return loop.run(wall_s);
}

}  // namespace brisk
