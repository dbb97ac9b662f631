// serve/response_events.h: one StreamHub thread writes the streams' events to their
// sockets. Over real loopback TCP connections with small buffers: every event arrives in
// order, and a client that stops reading gets its stream handed back to its own thread
// instead of blocking the hub (and with it every other stream). The hub frames its writes
// as HTTP chunks itself, the request thread through the (here fake) DataSink: the client
// must see one well-formed chunked body either way.
#include "serve/response_events.h"

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

namespace brisk::serve {
namespace {

// A connected loopback TCP pair {server end, client end}, both with small buffers so that
// a few hundred kilobytes unread fill them.
std::pair<int, int> tcp_pair() {
  const int small = 8192;
  int lst = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(lst, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lst, 1) != 0 ||
      getsockname(lst, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return {-1, -1};
  int cli = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(cli, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  if (connect(cli, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return {-1, -1};
  int srv = accept(lst, nullptr, nullptr);
  close(lst);
  setsockopt(srv, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
  return {srv, cli};
}

bool send_all(int fd, const char* d, size_t n) {
  while (n > 0) {
    const ssize_t k = send(fd, d, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    d += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// One HTTP/1.1 chunk, as httplib's DataSink frames a chunked response's writes.
bool send_chunk(int fd, const char* d, size_t n) {
  char head[32];
  const int h = std::snprintf(head, sizeof head, "%zx\r\n", n);
  return send_all(fd, head, static_cast<size_t>(h)) && send_all(fd, d, n) && send_all(fd, "\r\n", 2);
}

// Everything the client end receives, decoded as a chunked body: the chunks' data, then
// "END" for the terminating zero-size chunk; "<bad framing at N>" where the framing breaks.
std::string read_all(int fd) {
  std::string raw;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) raw.append(buf, static_cast<size_t>(n));
  std::string out;
  for (size_t at = 0; at < raw.size();) {
    const size_t eol = raw.find("\r\n", at);
    char* end = nullptr;
    const unsigned long size = eol == std::string::npos ? 0 : std::strtoul(raw.c_str() + at, &end, 16);
    if (eol == std::string::npos || end != raw.c_str() + eol || eol + 2 + size + 2 > raw.size() ||
        raw.compare(eol + 2 + size, 2, "\r\n") != 0)
      return out + "<bad framing at " + std::to_string(at) + ">";
    if (size == 0) return eol + 4 == raw.size() ? out + "END" : out + "<bytes after the last chunk>";
    out.append(raw, eol + 2, size);
    at = eol + 2 + size + 2;
  }
  return out + "<no last chunk>";
}

// What a request thread does with its stream: the hub first, then (if handed back) take()
// and blocking writes, as the server's content provider does. Returns how the hub ended.
ResponseEvents::HubResult serve_stream(StreamHub& hub, ResponseEvents& ev, int fd) {
  httplib::DataSink sink;
  sink.write = [fd](const char* d, size_t n) { return send_chunk(fd, d, n); };
  sink.done = [fd] { send_all(fd, "0\r\n\r\n", 5); };
  auto format = [](const StreamEvent& e) { return e.text + "|"; };
  const ResponseEvents::HubResult r = ev.write_through(hub, sink, fd, format);
  bool ends = false;
  if (r == ResponseEvents::HubResult::kHandedBack && !ev.write_unsent(fd, std::chrono::seconds(10), &ends))
    ends = true;  // (gone)
  else if (ends)
    sink.done();
  if (r == ResponseEvents::HubResult::kHandedBack)
    for (bool fin = ends; !fin;) {
      std::string out;
      for (const StreamEvent& e : ev.take(std::chrono::milliseconds(100))) {
        out += format(e);
        fin = fin || e.done;
      }
      if (!out.empty() && !sink.write(out.data(), out.size())) break;
      if (fin) sink.done();
    }
  shutdown(fd, SHUT_WR);
  return r;
}

StreamEvent event(int i, bool done, size_t bytes) {
  StreamEvent e;
  e.text = std::to_string(i) + std::string(bytes, 'x');
  e.done = done;
  return e;
}

std::string expected(int n, size_t bytes) {
  std::string s;
  for (int i = 0; i < n; ++i) s += std::to_string(i) + std::string(bytes, 'x') + "|";
  return s + "END";
}

TEST(StreamHub, WritesEveryEventInOrder) {
  StreamHub hub;
  auto [srv, cli] = tcp_pair();
  ASSERT_GE(srv, 0);
  auto ev = std::make_shared<ResponseEvents>(1);
  ev->push(event(0, false, 10));  // before the stream is attached
  auto writer = std::async(std::launch::async, [&] { return serve_stream(hub, *ev, srv); });
  auto reader = std::async(std::launch::async, [&, fd = cli] { return read_all(fd); });
  for (int i = 1; i < 500; ++i) ev->push(event(i, i == 499, 10));
  EXPECT_EQ(writer.get(), ResponseEvents::HubResult::kDone);
  EXPECT_EQ(reader.get(), expected(500, 10));
  close(srv);
  close(cli);
}

TEST(StreamHub, ClientThatStopsReadingIsHandedBackAndOthersGoOn) {
  StreamHub hub;
  auto [slow_srv, slow_cli] = tcp_pair();
  auto [fast_srv, fast_cli] = tcp_pair();
  ASSERT_GE(slow_srv, 0);
  ASSERT_GE(fast_srv, 0);
  auto slow = std::make_shared<ResponseEvents>(1), fast = std::make_shared<ResponseEvents>(1);
  auto slow_writer = std::async(std::launch::async, [&, fd = slow_srv] { return serve_stream(hub, *slow, fd); });
  // 1 MB to a client that reads nothing yet: far past both sockets' buffers.
  const int n_slow = 1000;
  for (int i = 0; i < n_slow; ++i) {
    slow->push(event(i, i == n_slow - 1, 1000));
    std::this_thread::sleep_for(std::chrono::microseconds(50));  // a few at a time, as tokens come
  }
  // The hub gave the slow stream back instead of blocking on it...
  ASSERT_EQ(slow_writer.wait_for(std::chrono::seconds(0)), std::future_status::timeout);  // its thread writes
  // ...so another stream still goes through it, start to end, while the slow one is unread.
  auto fast_writer = std::async(std::launch::async, [&, fd = fast_srv] { return serve_stream(hub, *fast, fd); });
  auto fast_reader = std::async(std::launch::async, [&, fd = fast_cli] { return read_all(fd); });
  for (int i = 0; i < 50; ++i) fast->push(event(i, i == 49, 10));
  EXPECT_EQ(fast_writer.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "stalled behind the slow client";
  // The slow client reads at last (which also frees a stalled hub) and gets everything, in order.
  EXPECT_EQ(read_all(slow_cli), expected(n_slow, 1000));
  EXPECT_EQ(slow_writer.get(), ResponseEvents::HubResult::kHandedBack);
  EXPECT_EQ(fast_writer.get(), ResponseEvents::HubResult::kDone);
  EXPECT_EQ(fast_reader.get(), expected(50, 10));
  for (int fd : {slow_srv, slow_cli, fast_srv, fast_cli}) close(fd);
}

// One event larger than the sockets' buffers, and the last: the hub writes what the socket
// takes and hands back the rest, which the request thread writes and ends.
TEST(StreamHub, ChunkTheSocketCannotTakeIsFinishedByTheRequestThread) {
  StreamHub hub;
  auto [srv, cli] = tcp_pair();
  ASSERT_GE(srv, 0);
  auto ev = std::make_shared<ResponseEvents>(1);
  ev->push(event(0, true, 400000));
  auto writer = std::async(std::launch::async, [&, fd = srv] { return serve_stream(hub, *ev, fd); });
  ASSERT_EQ(writer.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);  // waits on the client
  EXPECT_EQ(read_all(cli), expected(1, 400000));
  EXPECT_EQ(writer.get(), ResponseEvents::HubResult::kHandedBack);
  close(srv);
  close(cli);
}

TEST(StreamHub, FailedWriteEndsTheStreamAsGone) {
  StreamHub hub;
  auto [srv, cli] = tcp_pair();
  ASSERT_GE(srv, 0);
  close(cli);  // the client hung up
  auto ev = std::make_shared<ResponseEvents>(1);
  auto writer = std::async(std::launch::async, [&, fd = srv] { return serve_stream(hub, *ev, fd); });
  for (int i = 0; i < 200 && writer.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready; ++i)
    ev->push(event(i, false, 100));
  ASSERT_EQ(writer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(writer.get(), ResponseEvents::HubResult::kGone);
  close(srv);
}

}  // namespace
}  // namespace brisk::serve
