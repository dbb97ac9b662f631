// `brisk serve --stream-interval N`: streamed chunks are written N at a time, which must
// change neither the text nor the chunks (one per token, then [DONE]); a bad N is refused.
#include <gtest/gtest.h>

#include <future>

#include "serve_process.h"

namespace brisk::test {
namespace {

using json = nlohmann::json;

json greedy_request(bool stream) {
  // 23 tokens: the last group is shorter than the interval and goes out with the end.
  return {{"prompt", "Once upon a time"}, {"max_tokens", 23}, {"temperature", 0}, {"ignore_eos", true},
          {"stream", stream}};
}

struct Streamed {
  std::string text, finish_reason;
  int chunks = 0;  // data: lines before [DONE]
  bool done = false;
};

Streamed stream_completion(httplib::Client& cli) {
  std::string raw;
  auto res = cli.Post("/v1/completions", greedy_request(true).dump(), "application/json");
  Streamed s;
  if (!res || res->status != 200) return s;
  raw = res->body;
  for (size_t at = 0; (at = raw.find("data: ", at)) != std::string::npos;) {
    const size_t end = raw.find("\n\n", at);
    const std::string payload = raw.substr(at + 6, end - at - 6);
    at = end;
    if (payload == "[DONE]") {
      s.done = true;
      break;
    }
    json c = json::parse(payload);
    ++s.chunks;
    s.text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) s.finish_reason = c["choices"][0]["finish_reason"];
  }
  return s;
}

TEST(StreamInterval, SameTextAndChunksAsUnbatchedStreaming) {
  ServeProcess every1({"--ctx", "256", "--parallel", "4"});
  ASSERT_TRUE(every1.ok()) << every1.error();
  httplib::Client c1 = every1.client();
  const Streamed want = stream_completion(c1);
  ASSERT_TRUE(want.done);
  ASSERT_EQ(want.finish_reason, "length");
  every1.stop();

  ServeProcess every4({"--ctx", "256", "--parallel", "4", "--stream-interval", "4"});
  ASSERT_TRUE(every4.ok()) << every4.error();
  httplib::Client cli = every4.client();
  HttpResult whole = post_raw(cli, "/v1/completions", greedy_request(false).dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.json["choices"][0]["text"], want.text);

  // Four streams at once, each the same as the one-chunk-a-write stream.
  std::vector<std::future<Streamed>> streams;
  for (int i = 0; i < 4; ++i)
    streams.push_back(std::async(std::launch::async, [&] {
      httplib::Client c = every4.client();
      return stream_completion(c);
    }));
  for (auto& f : streams) {
    const Streamed got = f.get();
    EXPECT_TRUE(got.done);
    EXPECT_EQ(got.text, want.text);
    EXPECT_EQ(got.chunks, want.chunks);
    EXPECT_EQ(got.finish_reason, "length");
  }
  EXPECT_TRUE(every4.wait_idle());
}

TEST(StreamInterval, OutOfRangeIsRefused) {
  for (const char* bad : {"0", "-1", "1025"}) {
    ServeProcess s({"--stream-interval", bad});
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.error().find("--stream-interval must be in 1..1024"), std::string::npos) << s.error();
  }
}

}  // namespace
}  // namespace brisk::test
