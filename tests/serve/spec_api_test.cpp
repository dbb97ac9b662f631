// Per-request speculative decoding through `brisk serve`: the "speculative" field (and the
// --spec default) gives the same greedy text as plain decoding, bad values are a 400 that
// names the field.
#include <gtest/gtest.h>

#include <thread>

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
                          R"({"prompt": "x", "temperature": 0, "speculative": {"method": "smc"}})",
                          R"({"prompt": "x", "speculative": {"method": "lookup", "particles": 2}})",
                          R"({"prompt": "x", "speculative": {"method": "smc", "particles": 0}})",
                          R"({"prompt": "x", "speculative": {"method": "lookup", "k": 0}})",
                          R"({"prompt": "x", "speculative": {"k": 2}})"}) {
    HttpResult r = post_raw(cli, "/v1/completions", bad);
    EXPECT_EQ(r.status, 400) << bad << " -> " << r.body;
    EXPECT_EQ(r.json["error"]["param"], "speculative") << r.body;
  }
}

// Several draft-model requests at once: drafted together in shared draft passes, and with
// --spec-overlap half of them beside each target pass (MineDraft); each text equals its
// plain greedy text.
TEST(SpecApi, ConcurrentDraftRequestsWithOverlapKeepGreedyText) {
  ServeProcess server({"--ctx", "256", "--parallel", "4", "-t", "1", "--spec", "draft", "--spec-overlap",
                       "--draft", BRISK_SOURCE_DIR "/tests/fixtures/brisk-nano"});
  ASSERT_TRUE(server.ok()) << server.error();
  const std::vector<std::string> prompts = {
      "The LORD is my shepherd; I shall not want. The LORD is my", "Once upon a time, there was a",
      "In the beginning God created the heaven and the earth. And the", "The cat sat on the mat and the dog"};
  auto complete = [&](const std::string& prompt, json spec) {
    httplib::Client cli = server.client();
    json body = {{"prompt", prompt}, {"max_tokens", 32}, {"temperature", 0}, {"ignore_eos", true}};
    if (!spec.is_null()) body["speculative"] = spec;
    HttpResult r = post_raw(cli, "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.json["choices"][0]["text"].get<std::string>() : std::string();
  };
  std::vector<std::string> plain, spec(prompts.size());
  for (const std::string& p : prompts) plain.push_back(complete(p, {{"method", "none"}}));
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) clients.emplace_back([&, i] { spec[i] = complete(prompts[i], nullptr); });
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(spec[i], plain[i]) << prompts[i];
  EXPECT_TRUE(server.wait_idle());
  EXPECT_GT(server.metric("brisk_spec_accepted_tokens_total"), 0);
  EXPECT_GT(server.metric("brisk_spec_drafted_beside_tokens_total"), 0);
}

// SMC-SD per request: sampled particles from the server's --draft model, the tokens of the
// heaviest particle at the end (max_tokens of them with ignore_eos), reproducible for one
// seed, counted as drafted guesses; the server keeps serving plain requests beside it.
TEST(SpecApi, SmcPerRequestSampledAndReproducible) {
  ServeProcess server({"--ctx", "256", "--parallel", "2", "--draft", BRISK_SOURCE_DIR "/tests/fixtures/brisk-nano"});
  ASSERT_TRUE(server.ok()) << server.error();
  httplib::Client cli = server.client();
  auto complete = [&](json spec, double temperature) {
    json body = {{"prompt", "The LORD is my shepherd; I shall not want."}, {"max_tokens", 20},
                 {"temperature", temperature}, {"seed", 7}, {"ignore_eos", true}};
    if (!spec.is_null()) body["speculative"] = spec;
    HttpResult r = post_raw(cli, "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json;
  };
  json smc = {{"method", "smc"}, {"k", 3}, {"particles", 2}};
  json a = complete(smc, 0.8), b = complete(smc, 0.8);
  EXPECT_EQ(a["usage"]["completion_tokens"], 20) << a;
  EXPECT_EQ(a["choices"][0]["finish_reason"], "length") << a;
  EXPECT_FALSE(a["choices"][0]["text"].get<std::string>().empty());
  EXPECT_EQ(a["choices"][0]["text"], b["choices"][0]["text"]);  // same seed, same particles
  EXPECT_EQ(complete(nullptr, 0)["usage"]["completion_tokens"], 20);  // plain requests go on
  EXPECT_TRUE(server.wait_idle());
  // Two requests of 20 tokens in steps of k + 1 = 4: 5 steps of 3 guesses each.
  EXPECT_EQ(server.metric("brisk_spec_drafted_tokens_total"), 30);
}

}  // namespace
}  // namespace brisk::test
