// The load generator behind brisk bench-serve (serve/stream_load.h): one thread, many
// streams. Against canned answers written byte by byte (so every parser state meets a
// split), an httplib server, a dead port, and brisk serve itself.
#include "serve/stream_load.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve_process.h"

namespace brisk::test {
namespace {

using json = nlohmann::json;

// n token chunks, a usage chunk, [DONE]: what brisk serve streams (return_tokens).
std::string sse_events(int n, bool finish = true) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    json c = {{"choices", {{{"index", 0}, {"text", "t"}, {"tokens", {100 + i}},
                            {"finish_reason", finish && i == n - 1 ? json("length") : json(nullptr)}}}}};
    s += "data: " + c.dump() + "\n\n";
  }
  s += "data: " + json{{"choices", json::array()}, {"usage", {{"prompt_tokens", 5}, {"completion_tokens", n},
                                                              {"prompt_tokens_details", {{"cached_tokens", 2}}}}}}
                      .dump() +
       "\n\n";
  return s + "data: [DONE]\n\n";
}

std::string chunked(const std::string& body, size_t piece) {
  std::string out;
  for (size_t at = 0; at < body.size(); at += piece) {
    const std::string part = body.substr(at, piece);
    char hex[32];
    std::snprintf(hex, sizeof hex, "%zx", part.size());
    out += std::string(hex) + "\r\n" + part + "\r\n";
  }
  return out + "0\r\n\r\n";
}

// A loopback server that answers every request on a connection with the same bytes, one
// send a byte, then closes the connection if `close_after`. A thread a connection.
class CannedServer {
 public:
  CannedServer(std::string answer, bool close_after) : answer_(std::move(answer)), close_after_(close_after) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd_, 16);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] {
      for (;;) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        std::lock_guard lk(mu_);
        conns_.push_back(c);
        threads_.emplace_back([this, c] { serve(c); });
      }
    });
  }
  ~CannedServer() {
    shutdown(fd_, SHUT_RDWR);
    acceptor_.join();
    close(fd_);
    std::lock_guard lk(mu_);
    for (int c : conns_) shutdown(c, SHUT_RDWR);
    for (std::thread& t : threads_) t.join();
    for (int c : conns_) close(c);
  }
  int port() const { return port_; }

 private:
  void serve(int c) {
    const int one = 1;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::string req;
    char buf[4096];
    for (;;) {  // a request: headers, then Content-Length bytes
      const size_t head = req.find("\r\n\r\n");
      if (head != std::string::npos) {
        const size_t cl = req.find("Content-Length: ");
        const size_t body_len = cl == std::string::npos ? 0 : std::stoul(req.substr(cl + 16));
        if (req.size() >= head + 4 + body_len) {
          req.erase(0, head + 4 + body_len);
          for (char ch : answer_) send(c, &ch, 1, MSG_NOSIGNAL);
          if (close_after_) return (void)shutdown(c, SHUT_RDWR);
          continue;
        }
      }
      const ssize_t n = recv(c, buf, sizeof buf, 0);
      if (n <= 0) return;
      req.append(buf, static_cast<size_t>(n));
    }
  }
  std::string answer_;
  bool close_after_;
  int fd_ = -1, port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> conns_;
  std::vector<std::thread> threads_;
};

StreamLoad load_to(int port, int concurrency, int requests) {
  StreamLoad l;
  l.host = "127.0.0.1";
  l.port = port;
  l.path = "/v1/completions";
  l.concurrency = concurrency;
  l.requests = requests;
  l.body = [](int i) { return json{{"prompt", {1, 2, i}}, {"stream", true}}.dump(); };
  return l;
}

TEST(StreamLoad, ChunkedStreamSplitAnywhereOnOneKeptAliveConnection) {
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
  CannedServer srv(head + chunked(sse_events(5), 37), false);
  double wall = 0;
  const std::vector<StreamSample> s = run_stream_load(load_to(srv.port(), 1, 3), &wall);
  ASSERT_EQ(s.size(), 3u);
  for (const StreamSample& x : s) {
    EXPECT_TRUE(x.ok) << x.error;
    EXPECT_EQ(x.completion_tokens, 5);
    EXPECT_EQ(x.prompt_tokens, 5);
    EXPECT_EQ(x.cached_tokens, 2);
    EXPECT_EQ(x.itl.size(), 4u);  // gaps between the 5 token chunks
    EXPECT_GT(x.ttft, 0);
    EXPECT_GE(x.latency, x.ttft);
  }
  EXPECT_GT(wall, 0);
}

TEST(StreamLoad, BodyReadToCloseAndFixedLength) {
  const std::string events = sse_events(3);
  CannedServer to_close("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + events, true);
  CannedServer sized("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(events.size()) + "\r\n\r\n" + events,
                     false);
  for (int port : {to_close.port(), sized.port()}) {
    double wall = 0;
    const std::vector<StreamSample> s = run_stream_load(load_to(port, 2, 4), &wall);
    ASSERT_EQ(s.size(), 4u);
    for (const StreamSample& x : s) {
      EXPECT_TRUE(x.ok) << x.error;
      EXPECT_EQ(x.completion_tokens, 3);
    }
  }
}

TEST(StreamLoad, EachBrokenAnswerIsThatRequestsError) {
  const std::string sse = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const struct {
    std::string answer;
    bool close_after;
    std::string error;
  } cases[] = {
      {"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 22\r\n\r\n{\"error\":\"queue full\"}", false,
       "HTTP 429 {\"error\":\"queue full\"}"},
      {"SMTP ready\r\n", true, "bad status line"},
      {sse + "zz\r\n", true, "bad chunk size"},
      {sse + "5\r\nabcdefg\r\n", true, "chunk not followed by CRLF"},
      {sse + chunked("data: {not json\n\n", 64), false, "unparsable SSE chunk"},
      {sse + chunked(sse_events(2, false), 64), false, "no finish_reason"},
      {sse + chunked("data: [DONE]\n\n", 64), false, "no finish_reason"},
      {sse + chunked(sse_events(2).substr(0, 40), 64).substr(0, 30), true, "connection closed by the server"},
      {sse + chunked("data: {\"error\":{\"message\":\"generation failed\"}}\n\ndata: [DONE]\n\n", 64), false,
       "generation failed"},
  };
  for (const auto& c : cases) {
    CannedServer srv(c.answer, c.close_after);
    double wall = 0;
    const std::vector<StreamSample> s = run_stream_load(load_to(srv.port(), 1, 2), &wall);
    ASSERT_EQ(s.size(), 2u) << c.error;
    for (const StreamSample& x : s) {
      EXPECT_FALSE(x.ok) << c.error;
      EXPECT_NE(x.error.find(c.error), std::string::npos) << "got '" << x.error << "', want '" << c.error << "'";
    }
  }
}

TEST(StreamLoad, NobodyListeningFailsEveryRequestQuickly) {
  int port;
  {
    CannedServer gone("", true);
    port = gone.port();
  }
  double wall = 0;
  const std::vector<StreamSample> s = run_stream_load(load_to(port, 4, 6), &wall);
  ASSERT_EQ(s.size(), 6u);
  for (const StreamSample& x : s) EXPECT_NE(x.error.find("cannot connect"), std::string::npos) << x.error;
  EXPECT_LT(wall, 5.0);
}

// Concurrency is a cap: an httplib server counts the streams open at once.
TEST(StreamLoad, ConcurrencyCapsStreamsInFlight) {
  httplib::Server srv;
  std::atomic<int> open{0}, most{0};
  srv.Post("/v1/completions", [&](const httplib::Request&, httplib::Response& res) {
    const int now = ++open;
    for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {}
    res.set_chunked_content_provider("text/event-stream", [&](size_t, httplib::DataSink& sink) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const std::string ev = sse_events(4);
      sink.write(ev.data(), ev.size());
      --open;
      sink.done();
      return true;
    });
  });
  const int port = srv.bind_to_any_port("127.0.0.1");
  std::thread t([&] { srv.listen_after_bind(); });
  while (!srv.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  double wall = 0;
  const std::vector<StreamSample> s = run_stream_load(load_to(port, 3, 12), &wall);
  srv.stop();
  t.join();
  ASSERT_EQ(s.size(), 12u);
  for (const StreamSample& x : s) EXPECT_TRUE(x.ok) << x.error;
  EXPECT_EQ(most.load(), 3);
  EXPECT_GE(wall, 4 * 0.020);  // 12 requests, 3 at a time, 20 ms each
}

// bench-serve against brisk serve: every request completes with exactly --gen-len tokens.
TEST(StreamLoad, BenchServeAgainstBriskServe) {
  ServeProcess srv({"--ctx", "256", "--parallel", "4"});
  ASSERT_TRUE(srv.ok()) << srv.error();
  StreamLoad l = load_to(srv.port(), 4, 8);
  l.body = [](int i) {
    return json{{"prompt", {300 + i, 301, 302}}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true},
                {"stream", true}, {"return_tokens", true}, {"stream_options", {{"include_usage", true}}}}
        .dump();
  };
  double wall = 0;
  const std::vector<StreamSample> s = run_stream_load(l, &wall);
  ASSERT_EQ(s.size(), 8u);
  for (const StreamSample& x : s) {
    EXPECT_TRUE(x.ok) << x.error;
    EXPECT_EQ(x.completion_tokens, 12);
    EXPECT_EQ(x.prompt_tokens, 3);
    EXPECT_EQ(x.itl.size(), 11u);
  }
  EXPECT_TRUE(srv.wait_idle());
}

}  // namespace
}  // namespace brisk::test
