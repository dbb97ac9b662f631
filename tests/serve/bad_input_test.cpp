// Bad input against a running `brisk serve`: each case gets a 4xx JSON error in OpenAI's
// shape (or a clean stop), the server keeps serving, and no KV block stays in use.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "serve_process.h"

namespace brisk::test {
namespace {

using json = nlohmann::json;

void expect_error(const HttpResult& r, int status, const std::string& param = "") {
  EXPECT_EQ(r.status, status) << r.body;
  ASSERT_TRUE(r.json.is_object()) << r.body;
  ASSERT_TRUE(r.json.contains("error")) << r.body;
  const json& e = r.json["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << r.body;
  EXPECT_TRUE(e["type"].is_string()) << r.body;
  EXPECT_TRUE(e.contains("param") && e.contains("code")) << r.body;
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param) << r.body;
  }
}

class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServeProcess({"--ctx", "256", "--parallel", "4"}); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->ok()) << server_->error(); }
  // After every case: a good request still works and every KV block is free again.
  void TearDown() override {
    if (!server_->ok()) return;
    httplib::Client c = server_->client();
    HttpResult r = post_raw(c, "/v1/completions", R"({"prompt": "Hello", "max_tokens": 4})");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(server_->wait_idle()) << "KV blocks still in use: " << server_->metric("brisk_kv_blocks_used");
  }
  HttpResult post(const std::string& path, const std::string& body) {
    httplib::Client c = server_->client();
    return post_raw(c, path, body);
  }
  static ServeProcess* server_;
};
ServeProcess* BadInput::server_ = nullptr;

TEST_F(BadInput, MalformedJson) {
  expect_error(post("/v1/completions", R"({"prompt": "hi", )"), 400);
  expect_error(post("/v1/chat/completions", "not json at all"), 400);
  expect_error(post("/v1/completions", ""), 400);
  expect_error(post("/v1/completions", "[1, 2, 3]"), 400);  // not an object
  // a number no double holds (found by fuzz/fuzz_openai_request.cpp; it was a 500)
  expect_error(post("/v1/completions", R"({"prompt": "hi", "max_tokens": 1e999})"), 400);
  expect_error(post("/v1/chat/completions", R"({"messages": [], "temperature": -1E4444})"), 400);
}

TEST_F(BadInput, WrongTypes) {
  expect_error(post("/v1/completions", R"({"prompt": 5})"), 400, "prompt");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "max_tokens": "ten"})"), 400, "max_tokens");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "temperature": "hot"})"), 400, "temperature");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "stream": "yes"})"), 400, "stream");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "stop": 7})"), 400, "stop");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "seed": 1.5})"), 400, "seed");
  expect_error(post("/v1/completions", R"({"prompt": [1, "a"]})"), 400, "prompt");
  expect_error(post("/v1/completions", R"({"prompt": [99999999]})"), 400, "prompt");
  expect_error(post("/v1/chat/completions", R"({"messages": "hi"})"), 400, "messages");
  expect_error(post("/v1/chat/completions", R"({"messages": [{"role": 1, "content": "x"}]})"), 400);
  expect_error(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": 3}]})"), 400);
  expect_error(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})"),
               400, "logprobs");
}

TEST_F(BadInput, MissingMessagesOrPrompt) {
  expect_error(post("/v1/chat/completions", R"({"model": "x"})"), 400, "messages");
  expect_error(post("/v1/chat/completions", R"({"messages": []})"), 400, "messages");
  expect_error(post("/v1/completions", R"({"max_tokens": 3})"), 400, "prompt");
}

TEST_F(BadInput, EmptyPrompt) {
  expect_error(post("/v1/completions", R"({"prompt": ""})"), 400, "prompt");
  expect_error(post("/v1/completions", R"({"prompt": []})"), 400, "prompt");
}

TEST_F(BadInput, PromptLongerThanContext) {
  json ids = json::array();
  for (int i = 0; i < 400; ++i) ids.push_back(100 + i);  // the server runs with --ctx 256
  HttpResult r = post("/v1/completions", json{{"prompt", ids}}.dump());
  expect_error(r, 400, "prompt");
  EXPECT_EQ(r.json["error"]["code"], "context_length_exceeded");
  std::string text;
  for (int i = 0; i < 300; ++i) text += "the lighthouse keeper ";
  expect_error(post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", text}}}}}.dump()),
               400, "messages");
}

TEST_F(BadInput, MaxTokensNotPositiveOrAbsurd) {
  expect_error(post("/v1/completions", R"({"prompt": "hi", "max_tokens": 0})"), 400, "max_tokens");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "max_tokens": -5})"), 400, "max_tokens");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "max_tokens": 1000000000})"), 400, "max_tokens");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "max_tokens": 1e300})"), 400, "max_tokens");
  expect_error(post("/v1/chat/completions",
                    R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})"),
               400, "max_completion_tokens");
}

TEST_F(BadInput, NegativeTemperatureAndOtherRanges) {
  expect_error(post("/v1/completions", R"({"prompt": "hi", "temperature": -0.5})"), 400, "temperature");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "top_p": 1.5})"), 400, "top_p");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "top_k": -1})"), 400, "top_k");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "presence_penalty": 3})"), 400, "presence_penalty");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "n": 2})"), 400, "n");
  expect_error(post("/v1/completions", R"({"prompt": "hi", "logprobs": 50})"), 400, "logprobs");
  for (const char* bias : {R"([1, 2])", R"({"x": 1})", R"({"-1": 1})", R"({"1.5": 1})", R"({"99999999": 1})",
                           R"({"5": "up"})", R"({"5": 100.5})", R"({"5": -1e9})"})
    expect_error(post("/v1/completions", std::string(R"({"prompt": "hi", "logit_bias": )") + bias + "}"), 400,
                 "logit_bias");
}

TEST_F(BadInput, InvalidUtf8) {
  expect_error(post("/v1/completions", "{\"prompt\": \"bad \xff\xfe bytes\"}"), 400);
  expect_error(post("/v1/chat/completions",
                    "{\"messages\": [{\"role\": \"user\", \"content\": \"\xc3\x28\"}]}"), 400);
  expect_error(post("/v1/completions", R"({"prompt": "lone \ud800 surrogate"})"), 400);
}

TEST_F(BadInput, TooManyStopStrings) {
  expect_error(post("/v1/completions", R"({"prompt": "hi", "stop": ["a", "b", "c", "d", "e"]})"), 400, "stop");
}

TEST_F(BadInput, TenMegabyteBody) {
  std::string body = R"({"prompt": ")" + std::string(10u << 20, 'a') + R"("})";
  HttpResult r = post("/v1/completions", body);
  expect_error(r, 413);
}

TEST_F(BadInput, UnknownPathAndMethod) {
  httplib::Client c = server_->client();
  auto r = c.Get("/v1/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(json::parse(r->body)["error"].is_object());
  r = c.Get("/v1/completions");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405) << r->body;
  EXPECT_TRUE(json::parse(r->body)["error"].is_object());
  r = c.Put("/v1/chat/completions", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405) << r->body;
  r = c.Delete("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405) << r->body;
  expect_error(post("/v1/no-such-endpoint", "{}"), 404);
}

// Opens a raw streaming request, reads the first bytes of the SSE stream and hangs up.
// A raw connection to the server with `body` POSTed to /v1/completions; the caller closes it.
int post_and_keep_open(int port, const std::string& body) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST_F(BadInput, ClientGoneMidStream) {
  double cancelled0 = server_->metric("brisk_requests_cancelled_total");
  for (int round = 0; round < 3; ++round) {
    int fd = post_and_keep_open(server_->port(),
        R"({"prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": true, "stream": true})");
    ASSERT_GE(fd, 0);
    std::string got;
    char buf[4096];
    while (got.find("data: {") == std::string::npos) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    EXPECT_NE(got.find("200"), std::string::npos) << got;
    close(fd);
  }
  // The engine saw the cancellations (unless a stream finished before the hang-up).
  for (int i = 0; i < 100 && server_->metric("brisk_requests_cancelled_total") < cancelled0 + 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GE(server_->metric("brisk_requests_cancelled_total"), cancelled0 + 1);
}

// Without streaming nothing is written until the end, so the server must look for the
// hang-up itself. 240 tokens take >= 100 ms even on a fast machine; the server looks every
// 50 ms. (TearDown then checks that every block is free again.)
TEST_F(BadInput, ClientGoneBeforeTheNonStreamingAnswer) {
  double cancelled0 = server_->metric("brisk_requests_cancelled_total");
  for (int round = 0; round < 3; ++round) {
    int fd = post_and_keep_open(server_->port(), R"({"prompt": "Once upon a time", "max_tokens": 240, "ignore_eos": true})");
    ASSERT_GE(fd, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    close(fd);
  }
  for (int i = 0; i < 100 && server_->metric("brisk_requests_cancelled_total") < cancelled0 + 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GE(server_->metric("brisk_requests_cancelled_total"), cancelled0 + 2);
}

TEST_F(BadInput, ErrorsUnderLoadLeaveNoBlocks) {
  // Good and bad requests interleaved from several threads.
  std::vector<std::future<HttpResult>> fs;
  for (int i = 0; i < 16; ++i)
    fs.push_back(std::async(std::launch::async, [this, i] {
      std::string body = i % 2 ? R"({"prompt": "The sea", "max_tokens": 8, "stream": true})"
                               : R"({"prompt": "The sea", "max_tokens": -1})";
      return post("/v1/completions", body);
    }));
  for (int i = 0; i < 16; ++i) {
    HttpResult r = fs[i].get();
    EXPECT_EQ(r.status, i % 2 ? 200 : 400) << r.body;
  }
}

TEST(ServeAuth, WrongOrMissingApiKeyIs401) {
  ServeProcess s({}, "sekrit-key");
  ASSERT_TRUE(s.ok()) << s.error();
  httplib::Client bare("127.0.0.1", s.port());
  HttpResult r = post_raw(bare, "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})");
  expect_error(r, 401);
  httplib::Client wrong("127.0.0.1", s.port());
  wrong.set_bearer_token_auth("not-the-key");
  expect_error(post_raw(wrong, "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})"), 401);
  auto m = wrong.Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 401);
  httplib::Client good = s.client();
  EXPECT_EQ(post_raw(good, "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})").status, 200);
  EXPECT_EQ(s.stop(), 0) << s.log();
}

TEST(ServeLimits, FullQueueIs429) {
  ServeProcess s({"--parallel", "1", "--queue", "1"});
  ASSERT_TRUE(s.ok()) << s.error();
  std::vector<std::future<HttpResult>> fs;
  for (int i = 0; i < 8; ++i)
    fs.push_back(std::async(std::launch::async, [&s] {
      httplib::Client c = s.client();
      return post_raw(c, "/v1/completions",
                      R"({"prompt": "Once upon a time", "max_tokens": 64, "ignore_eos": true})");
    }));
  int ok = 0, busy = 0;
  for (auto& f : fs) {
    HttpResult r = f.get();
    if (r.status == 200) ++ok;
    if (r.status == 429) {
      ++busy;
      expect_error(r, 429);
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(busy, 1);
  EXPECT_EQ(ok + busy, 8);
  EXPECT_TRUE(s.wait_idle());
}

TEST(ServeLifecycle, SigtermStopsCleanlyMidStream) {
  ServeProcess s;
  ASSERT_TRUE(s.ok()) << s.error();
  std::promise<void> first;
  auto stream = std::async(std::launch::async, [&] {
    httplib::Client c = s.client();
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = R"({"prompt": "Once upon a time", "max_tokens": 2000, "ignore_eos": true, "stream": true})";
    req.set_header("Content-Type", "application/json");
    std::string got;
    bool signalled = false;
    req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
      got.append(d, n);
      if (!signalled) first.set_value(), signalled = true;
      return true;
    };
    c.send(req);
    if (!signalled) first.set_value();
    return got;
  });
  first.get_future().wait();
  EXPECT_EQ(s.stop(), 0) << s.log();
  std::string got = stream.get();
  EXPECT_NE(got.find("data: "), std::string::npos);
}

}  // namespace
}  // namespace brisk::test
