// brisk bench-serve: a load generator for an OpenAI-compatible server (brisk serve or any
// other). Prompts are random token ids sent to /v1/completions, so prompt lengths are
// exact; --shared-prefix makes the first P tokens the same in every request (prefix-cache
// workloads); ignore_eos makes every request generate exactly --gen-len tokens.
// Reports throughput, TTFT, TPOT (per request) and inter-token latency (per chunk).
// The requests are driven by one thread over non-blocking sockets (stream_load.h).
#include <httplib.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "command.h"
#include "serve/stream_load.h"
#include "util/error.h"

namespace brisk {
namespace {

using json = nlohmann::json;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double idx = p / 100.0 * (v.size() - 1);
  size_t lo = static_cast<size_t>(idx);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - lo);
}

struct Target {
  std::string host;
  int port = 80;
  std::string base_path;  // "" or e.g. "/proxy"
};

Target parse_url(const std::string& url) {
  std::smatch m;
  static const std::regex re(R"(^http://([^/:]+|\[[^\]]+\])(?::([0-9]{1,5}))?(/.*)?$)");
  if (!std::regex_match(url, m, re)) fail("--url must look like http://HOST:PORT[/PATH], got '{}'", url);
  Target t;
  t.host = m[1].str();
  if (t.host.front() == '[') t.host = t.host.substr(1, t.host.size() - 2);  // [::1]
  t.port = m[2].matched ? std::stoi(m[2].str()) : 80;
  if (t.port < 1 || t.port > 65535) fail("--url: port {} is out of range", t.port);
  std::string path = m[3].matched ? m[3].str() : "";
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.size() >= 3 && path.substr(path.size() - 3) == "/v1") path.resize(path.size() - 3);
  t.base_path = path;
  return t;
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

  // The model's id and vocabulary size (brisk serve lists n_vocab in meta; else 32000).
  std::string model = "default";
  int64_t n_vocab = 32000;
  {
    httplib::Client c(t.host, t.port);
    c.set_connection_timeout(10, 0);
    c.set_read_timeout(60, 0);
    if (!api_key.empty()) c.set_bearer_token_auth(api_key.c_str());
    auto r = c.Get((t.base_path + "/v1/models").c_str());
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
  StreamLoad load;
  load.host = t.host;
  load.port = t.port;
  load.path = t.base_path + "/v1/completions";
  load.api_key = api_key;
  load.concurrency = concurrency;
  load.requests = requests;
  load.duration_s = duration;
  load.rate = rate;
  load.seed = seed;
  load.body = [&](int i) {
    std::mt19937_64 r(seed * 1000003 + i);
    std::uniform_int_distribution<int64_t> d(tok.a(), tok.b());
    json ids = prefix;
    for (int k = shared_prefix; k < prompt_len; ++k) ids.push_back(d(r));
    return json{{"model", model}, {"prompt", ids}, {"max_tokens", gen_len}, {"temperature", temperature},
                {"ignore_eos", true}, {"stream", true}, {"return_tokens", true},
                {"stream_options", {{"include_usage", true}}}}
        .dump();
  };
  double wall = 0;
  const std::vector<StreamSample> samples = run_stream_load(load, &wall);

  std::vector<double> ttft, tpot, itl, lat;
  int64_t out_tokens = 0, cached = 0;
  int errors = 0;
  std::vector<std::string> first_errors;
  for (const StreamSample& s : samples) {
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
