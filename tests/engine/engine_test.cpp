// The serving engine through its public API, on the real bundled models: batching must not
// change results (greedy and seeded sampling), preemption, cancellation, stop strings,
// logprobs, limits, and no KV block leaks after any of it.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <latch>
#include <sstream>
#include <thread>

#include "engine_test_util.h"
#include "engine/generator.h"
#include "util/error.h"

namespace brisk::test {
namespace {

std::string dev_text() {
  std::ifstream f(BRISK_SOURCE_DIR "/tests/fixtures/dev.txt");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// n prompts of different lengths cut from dev.txt at different places.
std::vector<std::vector<int32_t>> prompts(const Tokenizer& tok, int n, int min_len, int max_len) {
  const std::vector<int32_t> all = tok.encode(dev_text(), false, false);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    const int len = min_len + (i * 37) % (max_len - min_len + 1);
    const size_t start = (static_cast<size_t>(i) * 211) % (all.size() - static_cast<size_t>(len));
    std::vector<int32_t> p;
    if (tok.add_bos() && tok.bos() >= 0) p.push_back(tok.bos());
    p.insert(p.end(), all.begin() + static_cast<std::ptrdiff_t>(start),
             all.begin() + static_cast<std::ptrdiff_t>(start) + len);
    out.push_back(std::move(p));
  }
  return out;
}

CompletionRequest request(std::vector<int32_t> prompt, int max_tokens, SamplingParams sp = greedy()) {
  CompletionRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling = sp;
  r.ignore_eos = true;
  return r;
}

// Runs the requests one at a time, then all at once; every output must be the same.
void expect_batching_invariant(LoadedModel& lm, const EngineConfig& cfg,
                               const std::vector<CompletionRequest>& reqs, uint64_t* preemptions = nullptr) {
  std::vector<Collected> alone;
  {
    Engine e(lm, cfg);
    for (const auto& r : reqs) alone.push_back(run_one(e, r));
    EXPECT_EQ(settled_metrics(e).kv_blocks_used, 0);
  }
  Engine e(lm, cfg);
  Collector c(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) e.submit(reqs[i], c.callback(i));
  c.wait();
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(c[i].tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(c[i].text, alone[i].text) << "request " << i;
    EXPECT_EQ(c[i].last.finish_reason, alone[i].last.finish_reason) << "request " << i;
    EXPECT_EQ(static_cast<int>(c[i].tokens.size()), reqs[i].max_tokens);
  }
  const EngineMetrics m = settled_metrics(e);
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.requests_finished, reqs.size());
  if (preemptions) *preemptions = m.preemptions_total;
}

struct ModelCase {
  const char* name;
  LoadedModel& (*get)();
};

class EngineModels : public ::testing::TestWithParam<ModelCase> {};

TEST_P(EngineModels, GreedyConcurrentEqualsAlone) {
  LoadedModel& lm = GetParam().get();
  std::vector<CompletionRequest> reqs;
  const auto ps = prompts(*lm.tokenizer, 32, 3, 150);
  for (int i = 0; i < 32; ++i) reqs.push_back(request(ps[static_cast<size_t>(i)], 4 + (i * 7) % 29));
  EngineConfig cfg;
  cfg.n_ctx = 256;
  cfg.max_running = 32;
  cfg.token_budget = 96;  // long prompts are chunked, mixed with decodes
  cfg.prefix_cache = "off";
  expect_batching_invariant(lm, cfg, reqs);
}

TEST_P(EngineModels, SeededSamplingConcurrentEqualsAlone) {
  LoadedModel& lm = GetParam().get();
  std::vector<CompletionRequest> reqs;
  const auto ps = prompts(*lm.tokenizer, 12, 5, 60);
  for (int i = 0; i < 12; ++i) {
    SamplingParams sp;
    sp.temperature = 1.0f;
    sp.top_k = 0;
    sp.top_p = 0.98f;
    sp.min_p = 0;
    sp.seed = 1000 + static_cast<uint64_t>(i % 4);
    reqs.push_back(request(ps[static_cast<size_t>(i)], 24, sp));
  }
  EngineConfig cfg;
  cfg.n_ctx = 128;
  cfg.max_running = 6;
  cfg.token_budget = 40;
  expect_batching_invariant(lm, cfg, reqs);
}

INSTANTIATE_TEST_SUITE_P(Models, EngineModels,
                         ::testing::Values(ModelCase{"tiny_q8_0", &tiny_model},
                                           ModelCase{"nano_hf", &nano_model}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Engine, SingleRequestEqualsGenerator) {
  LoadedModel& lm = tiny_model();
  const auto ps = prompts(*lm.tokenizer, 3, 10, 80);
  std::vector<GenerateResult> want;
  {
    Generator g(*lm.model, *lm.tokenizer, 256);
    for (const auto& p : ps) {
      GenerateOptions o;
      o.max_tokens = 30;
      o.sampling = greedy();
      want.push_back(g.generate(p, o));
    }
  }
  EngineConfig cfg;
  cfg.n_ctx = 256;
  Engine e(lm, cfg);
  for (size_t i = 0; i < ps.size(); ++i) {
    CompletionRequest r = request(ps[i], 30);
    r.ignore_eos = false;
    const Collected c = run_one(e, r);
    EXPECT_EQ(c.tokens, want[i].tokens);
    EXPECT_EQ(c.text, want[i].text);
    EXPECT_EQ(c.last.finish_reason, want[i].finish_reason);
    EXPECT_EQ(c.last.prompt_tokens, static_cast<int>(ps[i].size()));
    EXPECT_EQ(c.last.completion_tokens, static_cast<int>(want[i].tokens.size()));
  }
  EXPECT_EQ(settled_metrics(e).kv_blocks_used, 0);
}

TEST(Engine, PreemptionUnderATinyPoolKeepsResults) {
  LoadedModel& lm = tiny_model();
  std::vector<CompletionRequest> reqs;
  const auto ps = prompts(*lm.tokenizer, 6, 10, 30);
  for (int i = 0; i < 6; ++i) reqs.push_back(request(ps[static_cast<size_t>(i)], 50));
  EngineConfig cfg;
  cfg.n_ctx = 96;
  cfg.block_size = 8;
  cfg.kv_blocks = 14;  // one full sequence (12 blocks) and a bit: six cannot all grow
  cfg.max_running = 6;
  cfg.token_budget = 32;
  uint64_t preemptions = 0;
  expect_batching_invariant(lm, cfg, reqs, &preemptions);
  EXPECT_GT(preemptions, 0u);
}

TEST(Engine, ContextEndIsLength) {
  LoadedModel& lm = tiny_model();
  EngineConfig cfg;
  cfg.n_ctx = 40;
  Engine e(lm, cfg);
  const auto ps = prompts(*lm.tokenizer, 1, 30, 30);
  const Collected c = run_one(e, request(ps[0], 100));
  EXPECT_EQ(c.last.finish_reason, "length");
  EXPECT_EQ(ps[0].size() + c.tokens.size(), 40u);
  EXPECT_EQ(settled_metrics(e).kv_blocks_used, 0);
}

TEST(Engine, StopStringAcrossTokensIsCutAndHeldBack) {
  LoadedModel& lm = tiny_model();
  const Tokenizer& tok = *lm.tokenizer;
  const auto ps = prompts(tok, 1, 40, 40);
  EngineConfig cfg;
  cfg.n_ctx = 256;
  Engine e(lm, cfg);
  const Collected full = run_one(e, request(ps[0], 40));
  // Find a place where a token boundary falls inside printable text: the stop string is
  // the last 2 bytes of token k's text and the first 2 of token k+1's.
  std::string stop;
  size_t cut = 0;
  std::string so_far;
  for (size_t k = 0; k + 1 < full.tokens.size() && stop.empty(); ++k) {
    const std::string a = tok.decode({full.tokens[k]});
    const std::string b = tok.decode({full.tokens[k + 1]});
    so_far += a;
    auto ascii = [](const std::string& s) {
      return std::all_of(s.begin(), s.end(), [](char ch) { return ch > ' ' && ch < 127; });
    };
    if (k >= 3 && a.size() >= 2 && b.size() >= 2 && ascii(a) && ascii(b)) {
      const std::string cand = a.substr(a.size() - 2) + b.substr(0, 2);
      const size_t first = full.text.find(cand);
      if (first != std::string::npos && first + 2 == so_far.size()) {
        stop = cand;
        cut = first;
      }
    }
  }
  ASSERT_FALSE(stop.empty()) << "no token boundary inside a word in: " << full.text;
  CompletionRequest r = request(ps[0], 40);
  r.stop = {"this string never occurs \x01", stop};
  const Collected c = run_one(e, r);
  EXPECT_EQ(c.last.finish_reason, "stop");
  EXPECT_EQ(c.text, full.text.substr(0, cut)) << "stop '" << stop << "'";
  EXPECT_LT(c.tokens.size(), full.tokens.size());
  EXPECT_EQ(settled_metrics(e).kv_blocks_used, 0);
}

TEST(Engine, LogprobsAreLogSoftmaxOfTheRawLogits) {
  LoadedModel& lm = tiny_model();
  const auto ps = prompts(*lm.tokenizer, 1, 20, 20);
  Collected c;
  {
    EngineConfig cfg;
    cfg.n_ctx = 128;
    Engine e(lm, cfg);
    CompletionRequest r = request(ps[0], 8);
    SamplingParams sp;
    sp.temperature = 0.7f;
    sp.seed = 5;
    sp.repeat_penalty = 1.3f;  // penalties must not leak into logprobs
    r.sampling = sp;
    r.top_logprobs = 3;
    c = run_one(e, r);
    EXPECT_EQ(settled_metrics(e).kv_blocks_used, 0);
  }
  ASSERT_EQ(c.tokens.size(), 8u);
  ASSERT_EQ(c.logprobs.size(), 8u);
  ASSERT_EQ(c.top_logprobs.size(), 8u);
  // The same logits, computed separately (the engine is gone: the model is free).
  std::vector<int32_t> all = ps[0];
  all.insert(all.end(), c.tokens.begin(), c.tokens.end());
  KvCache cache(lm.model->cache_shape(1, 128));
  Batch b;
  b.add_sequence(all, 0, 0, true);
  std::vector<float> logits;
  lm.model->forward(b, cache, logits);
  const int64_t V = lm.model->config().n_vocab;
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    const float* row = logits.data() + (ps[0].size() - 1 + i) * V;
    double mx = row[0];
    for (int64_t j = 0; j < V; ++j) mx = std::max<double>(mx, row[j]);
    double s = 0;
    for (int64_t j = 0; j < V; ++j) s += std::exp(row[j] - mx);
    const double lse = mx + std::log(s);
    EXPECT_NEAR(c.logprobs[i], row[c.tokens[i]] - lse, 1e-3) << i;
    ASSERT_EQ(c.top_logprobs[i].size(), 3u);
    int32_t best = 0;
    for (int64_t j = 1; j < V; ++j) if (row[j] > row[best]) best = static_cast<int32_t>(j);
    EXPECT_EQ(c.top_logprobs[i][0].id, best);
    EXPECT_NEAR(c.top_logprobs[i][0].logprob, row[best] - lse, 1e-3);
    EXPECT_GE(c.top_logprobs[i][0].logprob, c.top_logprobs[i][1].logprob);
    EXPECT_GE(c.top_logprobs[i][1].logprob, c.top_logprobs[i][2].logprob);
    EXPECT_LE(c.logprobs[i], c.top_logprobs[i][0].logprob);
  }
}

TEST(Engine, CancellationFreesBlocks) {
  LoadedModel& lm = tiny_model();
  EngineConfig cfg;
  cfg.n_ctx = 512;
  cfg.max_running = 1;
  Engine e(lm, cfg);
  const auto ps = prompts(*lm.tokenizer, 2, 50, 60);
  Collector c(2);
  std::latch first(1);
  bool seen = false;
  const uint64_t a = e.submit(request(ps[0], 400), [&, cb = c.callback(0)](const StreamEvent& ev) {
    cb(ev);
    if (!seen) {
      seen = true;
      first.count_down();
    }
  });
  const uint64_t b = e.submit(request(ps[1], 400), c.callback(1));  // waits: max_running 1
  first.wait();
  int64_t used = 0;  // the running request holds blocks (metrics are published per step)
  for (int i = 0; i < 1000 && used == 0; ++i) {
    used = e.metrics().kv_blocks_used;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GT(used, 0);
  e.cancel(b);
  e.cancel(a);
  e.cancel(12345);  // unknown: ignored
  c.wait();
  EXPECT_EQ(c[0].last.finish_reason, "cancelled");
  EXPECT_EQ(c[1].last.finish_reason, "cancelled");
  EXPECT_LT(c[0].tokens.size(), 400u);
  EXPECT_TRUE(c[1].tokens.empty());
  const EngineMetrics m = settled_metrics(e);
  EXPECT_EQ(m.kv_blocks_used, 0);
  EXPECT_EQ(m.requests_cancelled, 2u);
  EXPECT_EQ(m.running, 0);
}

TEST(Engine, FullQueueRefusesWithEngineBusy) {
  LoadedModel& lm = tiny_model();
  EngineConfig cfg;
  cfg.n_ctx = 128;
  cfg.max_running = 1;
  cfg.max_queue = 2;
  Engine e(lm, cfg);
  const auto ps = prompts(*lm.tokenizer, 1, 10, 10);
  std::latch release(1), started(1);
  Collector c(3);
  bool once = false;
  // The first request's first event holds the engine thread until the queue is checked.
  e.submit(request(ps[0], 4), [&, cb = c.callback(0)](const StreamEvent& ev) {
    if (!once) {
      once = true;
      started.count_down();
      release.wait();
    }
    cb(ev);
  });
  started.wait();
  e.submit(request(ps[0], 4), c.callback(1));
  e.submit(request(ps[0], 4), c.callback(2));
  try {
    e.submit(request(ps[0], 4), {});
    ADD_FAILURE() << "no EngineBusy";
  } catch (const EngineBusy& b) {
    EXPECT_FALSE(b.stopping);
  }
  EXPECT_EQ(e.metrics().requests_rejected + 0, 0u);  // published at the next step
  release.count_down();
  c.wait();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(c[i].last.finish_reason, "length");
  const EngineMetrics m = settled_metrics(e);
  EXPECT_EQ(m.requests_rejected, 1u);
  EXPECT_EQ(m.requests_total, 3u);
  EXPECT_EQ(m.kv_blocks_used, 0);
}

TEST(Engine, InvalidRequestsThrow) {
  LoadedModel& lm = tiny_model();
  EngineConfig cfg;
  cfg.n_ctx = 32;
  Engine e(lm, cfg);
  EXPECT_THROW(e.submit(request({}, 4), {}), Error);
  EXPECT_THROW(e.submit(request(std::vector<int32_t>(32, 5), 4), {}), Error);
  EXPECT_NO_THROW(e.submit(request(std::vector<int32_t>(31, 5), 4), {}));
  EXPECT_THROW(e.submit(request({1, 2, 100000}, 4), {}), Error);
  EXPECT_THROW(e.submit(request({1, 2, -1}, 4), {}), Error);
  EXPECT_THROW(e.submit(request({1, 2}, 0), {}), Error);
  SamplingParams bad;
  bad.temperature = -1;
  EXPECT_THROW(e.submit(request({1, 2}, 4, bad), {}), Error);
  CompletionRequest r = request({1, 2}, 4);
  r.top_logprobs = 21;
  EXPECT_THROW(e.submit(r, {}), Error);
  r.top_logprobs = -1;
  r.stop = {""};
  EXPECT_THROW(e.submit(r, {}), Error);
  EXPECT_EQ(e.config().n_ctx, 32);
  EXPECT_EQ(e.config().kv_blocks, 8 * 2);
}

TEST(Engine, MetricsCountTokensAndLatencies) {
  LoadedModel& lm = tiny_model();
  EngineConfig cfg;
  cfg.n_ctx = 128;
  Engine e(lm, cfg);
  const auto ps = prompts(*lm.tokenizer, 4, 10, 20);
  Collector c(4);
  for (size_t i = 0; i < 4; ++i) e.submit(request(ps[i], 5), c.callback(i));
  c.wait();
  const EngineMetrics m = settled_metrics(e);
  uint64_t prompt = 0;
  for (const auto& p : ps) prompt += p.size();
  EXPECT_EQ(m.requests_total, 4u);
  EXPECT_EQ(m.requests_finished, 4u);
  EXPECT_EQ(m.prompt_tokens_total, prompt);
  EXPECT_EQ(m.generated_tokens_total, 20u);
  EXPECT_EQ(m.ttft_count, 4u);
  EXPECT_EQ(m.itl_count, 16u);
  ASSERT_EQ(m.ttft_counts.size(), m.latency_buckets.size());
  EXPECT_LE(m.ttft_counts.back(), m.ttft_count);
  for (size_t i = 1; i < m.itl_counts.size(); ++i) EXPECT_GE(m.itl_counts[i], m.itl_counts[i - 1]);
  EXPECT_GT(m.ttft_sum, 0);
  EXPECT_EQ(m.kv_blocks_total, 8 * 8);
  EXPECT_EQ(m.kv_blocks_used, 0);
}

TEST(Engine, DestructorCancelsWhatIsLeft) {
  LoadedModel& lm = tiny_model();
  const auto ps = prompts(*lm.tokenizer, 3, 10, 20);
  Collector c(3);
  {
    EngineConfig cfg;
    cfg.n_ctx = 512;
    cfg.max_running = 1;
    Engine e(lm, cfg);
    for (size_t i = 0; i < 3; ++i) e.submit(request(ps[i], 400), c.callback(i));
  }
  c.wait();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(c[i].last.finish_reason, "cancelled");
}

}  // namespace
}  // namespace brisk::test
