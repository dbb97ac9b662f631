// brisk bench-serve: a load generator for an OpenAI-compatible server (brisk serve or any
// other). Prompts are random token ids sent to /v1/completions, so prompt lengths are
// exact; --shared-prefix makes the first P tokens the same in every request (prefix-cache
// workloads); ignore_eos makes every request generate exactly --gen-len tokens.
// Reports throughput, TTFT, TPOT (per request) and inter-token latency (per chunk).
#include <httplib.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <thread>

#include "command.h"
#include "util/error.h"

namespace brisk {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Sample {
  bool ok = false;
  std::string error;
  double ttft = 0, tpot = 0, latency = 0;  // seconds
  std::vector<double> itl;                 // gaps between chunks that carried tokens
  int completion_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double idx = p / 100.0 * (v.size() - 1);
  size_t lo = static_cast<size_t>(idx);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - lo);
}

struct Target {
  std::string scheme_host_port;
  std::string base_path;  // "" or e.g. "/proxy"
};

Target parse_url(const std::string& url) {
  std::smatch m;
  static const std::regex re(R"(^(https?://[^/]+)(/.*)?$)");
  if (!std::regex_match(url, m, re)) fail("--url must look like http://HOST:PORT, got '{}'", url);
  std::string path = m[2].matched ? m[2].str() : "";
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.size() >= 3 && path.substr(path.size() - 3) == "/v1") path.resize(path.size() - 3);
  return {m[1].str(), path};
}

Sample one_request(httplib::Client& cli, const std::string& path, const std::string& body) {
  Sample s;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  std::string buf, last_finish;
  bool done = false;
  Clock::time_point t0 = Clock::now(), first{}, prev{};
  int tokens_seen = 0;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buf.append(data, n);
    for (size_t end; (end = buf.find("\n\n")) != std::string::npos;) {
      std::string ev = buf.substr(0, end);
      buf.erase(0, end + 2);
      if (ev.rfind("data: ", 0) != 0) continue;
      std::string payload = ev.substr(6);
      if (payload == "[DONE]") {
        done = true;
        continue;
      }
      json j = json::parse(payload, nullptr, false);
      if (j.is_discarded()) {
        s.error = "unparsable SSE chunk";
        return false;
      }
      if (j.contains("error")) {
        s.error = j["error"].value("message", "error chunk");
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object()) {
        s.completion_tokens = j["usage"].value("completion_tokens", 0);
        s.prompt_tokens = j["usage"].value("prompt_tokens", 0);
        if (j["usage"].contains("prompt_tokens_details"))
          s.cached_tokens = j["usage"]["prompt_tokens_details"].value("cached_tokens", 0);
      }
      for (const json& c : j.value("choices", json::array())) {
        int k = c.contains("tokens") && c["tokens"].is_array() ? static_cast<int>(c["tokens"].size())
                : (c.value("text", "").empty() ? 0 : 1);
        if (k > 0) {
          Clock::time_point now = Clock::now();
          if (tokens_seen == 0) first = now;
          else s.itl.push_back(std::chrono::duration<double>(now - prev).count());
          prev = now;
          tokens_seen += k;
        }
        if (c.contains("finish_reason") && c["finish_reason"].is_string())
          last_finish = c["finish_reason"].get<std::string>();
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool sent = cli.send(req, res, err);
  Clock::time_point t1 = Clock::now();
  if (!sent) {
    if (s.error.empty()) s.error = "transport: " + httplib::to_string(err);
    return s;
  }
  if (res.status != 200) {
    s.error = "HTTP " + std::to_string(res.status) + " " + res.body.substr(0, 200);
    return s;
  }
  if (!s.error.empty()) return s;
  if (!done) s.error = "stream ended without [DONE]";
  else if (last_finish.empty()) s.error = "no finish_reason";
  else if (tokens_seen == 0) s.error = "no tokens";
  if (!s.error.empty()) return s;
  if (s.completion_tokens == 0) s.completion_tokens = tokens_seen;
  s.ok = true;
  s.latency = std::chrono::duration<double>(t1 - t0).count();
  s.ttft = std::chrono::duration<double>(first - t0).count();
  double decode = std::chrono::duration<double>(prev - first).count();
  s.tpot = s.completion_tokens > 1 ? decode / (s.completion_tokens - 1) : 0;
  return s;
}

int cmd_bench_serve(int argc, char** argv) {
  CLI::App app{"Load-test an OpenAI-compatible server"};
  std::string url = "http://127.0.0.1:8080", api_key;
  int concurrency = 1, requests = 32, prompt_len = 128, gen_len = 128, shared_prefix = 0;
  double rate = 0, duration = 0, temperature = 0;
  uint64_t seed = 1;
  bool as_json = false;
  app.add_option("--url", url, "server base URL (default http://127.0.0.1:8080)");
  app.add_option("-c,--concurrency", concurrency, "requests in flight at once (default 1)");
  app.add_option("-n,--requests", requests, "requests to send (default 32)");
  app.add_option("--prompt-len", prompt_len, "prompt tokens per request (default 128)");
  app.add_option("--gen-len", gen_len, "tokens to generate per request (default 128)");
  app.add_option("--shared-prefix", shared_prefix, "leading prompt tokens shared by all requests (default 0)");
  app.add_option("--rate", rate, "arrivals per second, Poisson (default 0: back to back)");
  app.add_option("--duration", duration, "run for this many seconds instead of --requests");
  app.add_option("--seed", seed, "seed of the random prompts (default 1)");
  app.add_option("--temperature", temperature, "sampling temperature of every request (default 0: greedy; "
                 "the server's other sampling defaults are OpenAI's: top_p 1, no top-k)")
      ->check(CLI::Range(0.0, 2.0));
  app.add_option("--api-key", api_key, "sent as 'Authorization: Bearer KEY'");
  app.add_flag("--json", as_json, "print one JSON object");
  CLI11_PARSE(app, argc, argv);
  if (concurrency < 1) fail("--concurrency must be >= 1, got {}", concurrency);
  if (requests < 1 && duration <= 0) fail("--requests must be >= 1, got {}", requests);
  if (prompt_len < 1 || gen_len < 1) fail("--prompt-len and --gen-len must be >= 1");
  if (shared_prefix < 0 || shared_prefix > prompt_len)
    fail("--shared-prefix must be in 0..--prompt-len ({}), got {}", prompt_len, shared_prefix);
  if (rate < 0) fail("--rate must be >= 0");

  Target t = parse_url(url);
  auto make_client = [&] {
    auto c = std::make_unique<httplib::Client>(t.scheme_host_port);
    c->set_keep_alive(true);
    // Without it the request's header and body writes meet Nagle's algorithm and the
    // server's delayed ACK: ~40 ms added to every request's TTFT.
    c->set_tcp_nodelay(true);
    c->set_read_timeout(600, 0);
    c->set_write_timeout(60, 0);
    c->set_connection_timeout(10, 0);
    if (!api_key.empty()) c->set_bearer_token_auth(api_key.c_str());
    return c;
  };

  // The model's id and vocabulary size (brisk serve lists n_vocab in meta; else 32000).
  std::string model = "default";
  int64_t n_vocab = 32000;
  {
    auto c = make_client();
    auto r = c->Get((t.base_path + "/v1/models").c_str());
    if (!r) fail("cannot reach {}: {}", url, httplib::to_string(r.error()));
    if (r->status != 200) fail("GET /v1/models: HTTP {} {}", r->status, r->body.substr(0, 200));
    json j = json::parse(r->body, nullptr, false);
    if (!j.is_discarded() && j.contains("data") && !j["data"].empty()) {
      model = j["data"][0].value("id", model);
      if (j["data"][0].contains("meta")) n_vocab = j["data"][0]["meta"].value("n_vocab", n_vocab);
    }
  }

  std::mt19937_64 rng(seed);
  // Token ids from the upper part of the vocabulary: ordinary tokens, no control ids.
  std::uniform_int_distribution<int64_t> tok(std::min<int64_t>(256, n_vocab / 2), n_vocab - 1);
  std::vector<int64_t> prefix(shared_prefix);
  for (auto& x : prefix) x = tok(rng);
  const int total = duration > 0 ? std::numeric_limits<int>::max() : requests;
  auto make_body = [&](int i) {
    std::mt19937_64 r(seed * 1000003 + i);
    std::uniform_int_distribution<int64_t> d(tok.a(), tok.b());
    json ids = prefix;
    for (int k = shared_prefix; k < prompt_len; ++k) ids.push_back(d(r));
    return json{{"model", model}, {"prompt", ids}, {"max_tokens", gen_len}, {"temperature", temperature},
                {"ignore_eos", true}, {"stream", true}, {"return_tokens", true},
                {"stream_options", {{"include_usage", true}}}}
        .dump();
  };

  // Arrival schedule: back to back, or Poisson at --rate.
  std::exponential_distribution<double> gap(rate > 0 ? rate : 1.0);
  std::mutex mu;
  double next_arrival = 0;
  std::atomic<int> next{0};
  std::vector<Sample> samples;
  Clock::time_point start = Clock::now();
  auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration));
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      auto cli = make_client();
      for (;;) {
        int i = next.fetch_add(1);
        if (i >= total) return;
        if (duration > 0 && Clock::now() >= deadline) return;
        if (rate > 0) {
          double at;
          {
            std::lock_guard lk(mu);
            next_arrival += gap(rng);
            at = next_arrival;
          }
          std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                    std::chrono::duration<double>(at)));
        }
        Sample s = one_request(*cli, t.base_path + "/v1/completions", make_body(i));
        if (!s.ok) cli = make_client();  // a fresh connection after a failure
        std::lock_guard lk(mu);
        samples.push_back(std::move(s));
      }
    });
  }
  for (auto& w : workers) w.join();
  double wall = std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<double> ttft, tpot, itl, lat;
  int64_t out_tokens = 0, cached = 0;
  int errors = 0;
  std::vector<std::string> first_errors;
  for (const Sample& s : samples) {
    if (!s.ok) {
      ++errors;
      if (first_errors.size() < 5) first_errors.push_back(s.error);
      continue;
    }
    ttft.push_back(s.ttft * 1e3);
    tpot.push_back(s.tpot * 1e3);
    lat.push_back(s.latency * 1e3);
    for (double g : s.itl) itl.push_back(g * 1e3);
    out_tokens += s.completion_tokens;
    cached += s.cached_tokens;
  }
  int ok = static_cast<int>(samples.size()) - errors;
  json r = {{"url", url}, {"model", model}, {"concurrency", concurrency}, {"requests", samples.size()},
            {"ok", ok}, {"errors", errors}, {"prompt_len", prompt_len}, {"gen_len", gen_len},
            {"shared_prefix", shared_prefix}, {"rate", rate}, {"duration_s", wall},
            {"requests_per_s", ok / wall}, {"output_tokens_per_s", out_tokens / wall},
            {"cached_prompt_tokens", cached},
            {"ttft_ms", {{"p50", percentile(ttft, 50)}, {"p90", percentile(ttft, 90)}, {"p99", percentile(ttft, 99)}}},
            {"tpot_ms", {{"p50", percentile(tpot, 50)}, {"p90", percentile(tpot, 90)}, {"p99", percentile(tpot, 99)}}},
            {"itl_ms", {{"p50", percentile(itl, 50)}, {"p90", percentile(itl, 90)}, {"p99", percentile(itl, 99)}}},
            {"latency_ms", {{"p50", percentile(lat, 50)}, {"p99", percentile(lat, 99)}}},
            {"first_errors", first_errors}};
  if (as_json) {
    std::printf("%s\n", r.dump().c_str());
  } else {
    std::printf("bench-serve %s  model %s\n", url.c_str(), model.c_str());
    std::printf("  concurrency %d, prompt %d (shared %d), gen %d, rate %s\n", concurrency, prompt_len,
                shared_prefix, gen_len, rate > 0 ? fmt::format("{}/s", rate).c_str() : "max");
    std::printf("  requests     %zu ok %d errors %d in %.2f s\n", samples.size(), ok, errors, wall);
    std::printf("  throughput   %.2f req/s, %.1f output tok/s\n", ok / wall, out_tokens / wall);
    std::printf("  TTFT ms      p50 %.1f  p90 %.1f  p99 %.1f\n", percentile(ttft, 50), percentile(ttft, 90), percentile(ttft, 99));
    std::printf("  TPOT ms      p50 %.2f  p90 %.2f  p99 %.2f\n", percentile(tpot, 50), percentile(tpot, 90), percentile(tpot, 99));
    std::printf("  ITL ms       p50 %.2f  p90 %.2f  p99 %.2f\n", percentile(itl, 50), percentile(itl, 90), percentile(itl, 99));
    std::printf("  cached prompt tokens %lld\n", static_cast<long long>(cached));
    for (const std::string& e : first_errors) std::printf("  error: %s\n", e.c_str());
  }
  return errors ? 1 : 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("bench-serve", "load-test an OpenAI-compatible server (throughput, TTFT, TPOT)",
              brisk::cmd_bench_serve);
