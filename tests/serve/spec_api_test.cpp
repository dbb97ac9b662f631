// Per-request speculative decoding through `brisk serve`: the "speculative" field (and the
// --spec default) gives the same greedy text as plain decoding, bad values are a 400 that
// names the field.
#include <gtest/gtest.h>

#include "serve_process.h"

namespace brisk::test {
namespace {

using json = nlohmann::json;

TEST(SpecApi, PerRequestAndDefaultSpeculationKeepGreedyText) {
  ServeProcess server({"--ctx", "256", "--parallel", "4", "--spec", "racer", "--draft",
                       BRISK_SOURCE_DIR "/tests/fixtures/brisk-nano"});
  ASSERT_TRUE(server.ok()) << server.error();
  httplib::Client cli = server.client();
  auto complete = [&](json spec) {
    json body = {{"prompt", "The LORD is my shepherd; I shall not want. The LORD is my"},
                 {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
    if (!spec.is_null()) body["speculative"] = spec;
    HttpResult r = post_raw(cli, "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json["choices"][0]["text"].get<std::string>();
  };
  const std::string plain = complete({{"method", "none"}});
  EXPECT_EQ(complete({{"method", "lookup"}, {"k", 5}}), plain);
  EXPECT_EQ(complete({{"method", "draft"}, {"k", 3}}), plain);
  EXPECT_EQ(complete(nullptr), plain);  // the server's --spec racer
  EXPECT_TRUE(server.wait_idle());
  EXPECT_GT(server.metric("brisk_spec_accepted_tokens_total"), 0);
  EXPECT_GT(server.metric("brisk_spec_drafted_tokens_total"), server.metric("brisk_spec_accepted_tokens_total"));

  for (const char* bad : {R"({"prompt": "x", "speculative": "lookup"})",
                          R"({"prompt": "x", "speculative": {"method": "medusa"}})",
                          R"({"prompt": "x", "speculative": {"method": "smc"}})",
                          R"({"prompt": "x", "speculative": {"method": "lookup", "k": 0}})",
                          R"({"prompt": "x", "speculative": {"k": 2}})"}) {
    HttpResult r = post_raw(cli, "/v1/completions", bad);
    EXPECT_EQ(r.status, 400) << bad << " -> " << r.body;
    EXPECT_EQ(r.json["error"]["param"], "speculative") << r.body;
  }
}

}  // namespace
}  // namespace brisk::test
