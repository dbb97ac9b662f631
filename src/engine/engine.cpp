// The engine thread: takes submitted requests and cancellations from the other threads,
// asks the scheduler for each step's plan, runs the plan as one ragged batch through the
// model, samples the sequences whose last token was computed, streams their events, and
// frees the blocks of whatever finished. Drafting and verification of speculative
// sequences, and SMC-SD requests, are in engine_speculation.cpp.
#include "engine/engine.h"

#include <algorithm>

#include "engine/draft_model.h"
#include "engine/engine_impl.h"
#include "engine/speculative_decoder.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace brisk {

namespace {

EngineConfig resolve(const EngineConfig& in, const Model& model) {
  const ModelConfig& mc = model.config();
  EngineConfig c = in;
  if (c.n_ctx < 0) fail("engine: n_ctx must be >= 0, got {}", c.n_ctx);
  if (c.n_ctx == 0) c.n_ctx = std::min<int64_t>(mc.n_ctx_train > 0 ? mc.n_ctx_train : 4096, 4096);
  if (c.n_ctx < 2) fail("engine: n_ctx must be >= 2, got {}", c.n_ctx);
  if (c.block_size < 1) fail("engine: block_size must be >= 1, got {}", c.block_size);
  if (c.max_running < 1) fail("engine: max_running must be >= 1, got {}", c.max_running);
  if (c.max_queue < 0) fail("engine: max_queue must be >= 0, got {}", c.max_queue);
  if (c.token_budget < 1) fail("engine: token_budget must be >= 1, got {}", c.token_budget);
  // Every running sequence's decode token must fit in a step, or the newest would starve.
  c.token_budget = std::max<int64_t>(c.token_budget, c.max_running);
  const int64_t per_seq = (c.n_ctx + c.block_size - 1) / c.block_size;
  if (c.kv_blocks == 0) c.kv_blocks = c.max_running * per_seq;
  if (c.kv_blocks < per_seq)
    fail("engine: {} KV blocks of {} positions cannot hold one sequence of {} positions "
         "(need at least {})", c.kv_blocks, c.block_size, c.n_ctx, per_seq);
  if (c.prefix_cache != "off" && c.prefix_cache != "lru" && c.prefix_cache != "gdsf")
    fail("engine: unknown prefix cache policy '{}' (expected off, lru or gdsf)", c.prefix_cache);
  if (c.spec_overlap && c.speculative.draft_model.empty())
    fail("engine: --spec-overlap overlaps a draft model's drafting with verification: it needs --draft MODEL");
  SpecOptions spec = c.speculative;
  if (spec.method != "draft") spec.draft_model.clear(), spec.draft_vocab = 0;  // loaded for the requests that ask
  spec.validate();
  if (spec.method == "smc")
    fail("engine: speculative method 'smc' is approximate and needs sampling: requests choose it "
         "(\"speculative\": {{\"method\": \"smc\"}}), it cannot be the server's default");
  // A model with its own K/V storage cannot read a block another sequence computed.
  if (!model.uses_kv_blocks()) c.prefix_cache = "off";
  // Evicted blocks no longer hold what their tokens' hashes name, and a rollback of
  // rejected guesses cannot restore what eviction compacted.
  if (KvCache(model.cache_shape(1, 2)).evicting()) {
    c.prefix_cache = "off";
    if (spec.enabled())
      fail("engine: speculative decoding ({}) cannot be combined with token eviction (--kv-evict)",
           spec.method);
  }
  return c;
}

// How many attended positions cost as much as one token through the linear layers
// (for the gdsf policy's recompute cost).
double attn_ratio(const ModelConfig& m) {
  const double E = static_cast<double>(m.n_embd), per_layer =
      2 * E * static_cast<double>(m.q_dim()) + 2 * E * static_cast<double>(m.kv_dim()) +
      3 * E * static_cast<double>(m.n_ff);
  const double linear = static_cast<double>(m.n_layer) * per_layer + E * static_cast<double>(m.n_vocab);
  return linear / (2.0 * static_cast<double>(m.n_layer) * static_cast<double>(m.q_dim()));
}

double seconds(Sequence::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

Engine::Impl::Impl(LoadedModel& model, const EngineConfig& config)
    : lm(model),
      cfg(resolve(config, *model.model)),
      kv([&] {
        KvCacheShape s = model.model->cache_shape(cfg.max_running, cfg.n_ctx);
        s.block_size = cfg.block_size;
        s.n_blocks = cfg.kv_blocks;
        return s;
      }()),
      pool(cfg.kv_blocks, cfg.block_size, cfg.prefix_cache, attn_ratio(model.model->config())),
      sched(SchedulerConfig{cfg.token_budget, cfg.max_running, cfg.n_ctx}, pool, &kv),
      pacer(cfg.token_budget, cfg.block_size) {
  if (!cfg.speculative.draft_model.empty()) {
    draft = load_draft_model(cfg.speculative.draft_model, *model.tokenizer, cfg.speculative.draft_vocab);
  }
  if (cfg.spec_overlap) ThreadPool::global();  // made here, not first by the drafter thread
  update_metrics();
  thread = std::thread([this] { loop(); });
}

void Engine::Impl::loop() {
  for (;;) {
    std::vector<uint64_t> to_cancel;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] {
        return stopping || !incoming.empty() || !cancels.empty() || !sched.idle() || smc_seq ||
               !smc_waiting.empty();
      });
      if (stopping) break;
      while (!incoming.empty()) {
        Sequence* s = incoming.front().get();
        prompt_tokens += static_cast<uint64_t>(s->n_prompt);
        live.emplace(s->id, std::move(incoming.front()));
        incoming.pop_front();
        if (s->smc) smc_waiting.push_back(s);
        else sched.add(s);
      }
      to_cancel.swap(cancels);
    }
    for (uint64_t id : to_cancel) cancel_now(id);
    step();
    step_smc();
    update_metrics();
  }
  // Stopping: everything left ends as cancelled.
  {
    std::lock_guard<std::mutex> lk(mu);
    while (!incoming.empty()) {
      Sequence* s = incoming.front().get();
      live.emplace(s->id, std::move(incoming.front()));
      incoming.pop_front();
      if (s->smc) smc_waiting.push_back(s);
      else sched.add(s);
    }
  }
  std::vector<uint64_t> ids;
  for (auto& [id, s] : live) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) cancel_now(id);
  update_metrics();
}

void Engine::Impl::finish(Sequence& s, StreamEvent& ev, const std::string& reason,
                          const std::string& error) {
  ev.done = true;
  ev.finish_reason = reason;
  ev.error = error;
  ev.prompt_tokens = static_cast<int>(s.n_prompt);
  ev.completion_tokens = static_cast<int>(s.n_generated());
  ev.cached_prompt_tokens = static_cast<int>(s.cached_prompt_tokens);
  s.done = true;
  sched.remove(&s);
  if (reason == "cancelled") ++cancelled; else ++finished;
  emit(s, ev);
}

void Engine::Impl::emit(Sequence& s, const StreamEvent& ev) {
  try {
    if (s.on_event) s.on_event(ev);
  } catch (...) {
    // A throwing callback must not take the engine down; the request goes on.
  }
}

void Engine::Impl::cancel_now(uint64_t id) {
  auto it = live.find(id);
  if (it == live.end()) return;
  Sequence& s = *it->second;
  if (&s == smc_seq) smc_seq = nullptr, smc.reset();
  std::erase(smc_waiting, &s);
  StreamEvent ev;  // text not shown yet (held back) is dropped: the client is gone
  finish(s, ev, "cancelled");
  live.erase(it);
}

void Engine::Impl::step() {
  const auto t0 = Sequence::Clock::now();
  const uint64_t generated_before = generated;
  std::vector<DraftRequest> now, beside;
  const int n_spec = plan_drafts(now, beside);
  const int64_t n_prefill = draft_and_run(t0, now, beside);
  if (n_spec > 0 && n_prefill == 0)
    draft_cap.observe(static_cast<int64_t>(generated - generated_before), seconds(Sequence::Clock::now() - t0));
}

int64_t Engine::Impl::run_batch(Sequence::Clock::time_point t0) {
  sched.set_prefill_cap(pacer.cap());
  StepPlan plan = sched.schedule();
  if (plan.empty()) return -1;
  int64_t n_prefill = plan.n_tokens;
  for (int64_t i = 0; i < plan.n_decode; ++i) n_prefill -= plan.chunks[static_cast<size_t>(i)].n;
  batch.clear();
  for (const ScheduledChunk& c : plan.chunks)
    for (int64_t i = 0; i < c.n; ++i) {
      const int64_t p = c.start + i, first_draft = c.n - c.n_draft;
      const int32_t tok = i < first_draft ? c.seq->tokens[static_cast<size_t>(p)]
                                          : c.seq->drafts[static_cast<size_t>(i - first_draft)].id;
      batch.add(tok, static_cast<int32_t>(p), c.seq->slot, c.n_draft > 0 || (c.logits && i + 1 == c.n));
    }
  try {
    lm.model->forward(batch, kv, logits);
  } catch (const std::exception& e) {
    // A bug, not a bad request (requests are checked at submit): fail the batch's
    // sequences and keep serving the others.
    for (const ScheduledChunk& c : plan.chunks) {
      StreamEvent ev;
      const uint64_t id = c.seq->id;
      finish(*c.seq, ev, "error", e.what());
      live.erase(id);
    }
    return -1;
  }
  sched.on_computed(plan);
  const int64_t n_vocab = lm.model->config().n_vocab;
  const size_t n_chunks = plan.chunks.size();
  std::vector<int64_t> first_row(n_chunks, -1);  // each chunk's first logits row
  std::vector<size_t> plain;  // decodes without drafts: sampled ahead, in parallel
  for (size_t i = 0, row = 0; i < n_chunks; ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    if (!c.logits) continue;
    first_row[i] = static_cast<int64_t>(row);
    row += static_cast<size_t>(1 + c.n_draft);
    if (c.n_draft == 0) plain.push_back(i);
  }
  // Each sequence's sampler and logits row are its own, so their draws can run on the pool:
  // at temperature 1 over brisk-tiny's 16,384 tokens a draw costs ~20 us, 16 of them on
  // one thread a sixth of the step they follow. Logprobs come from the raw row (the
  // sampler changes it in place), so that is kept first.
  std::vector<int32_t> sampled(n_chunks, -1);
  if (raw_rows.size() < n_chunks) raw_rows.resize(n_chunks);
  ThreadPool::global().parallel_for(static_cast<int64_t>(plain.size()), [&](int64_t b, int64_t e, int) {
    for (int64_t j = b; j < e; ++j) {
      const size_t i = plain[static_cast<size_t>(j)];
      Sequence& s = *plan.chunks[i].seq;
      float* lg = logits.data() + first_row[i] * n_vocab;
      if (s.request.top_logprobs >= 0) raw_rows[i].assign(lg, lg + n_vocab);
      sampled[i] = s.sampler->sample(std::span<float>(lg, static_cast<size_t>(n_vocab)), s.tokens);
    }
  });
  std::vector<uint64_t> done;
  for (size_t i = 0; i < n_chunks; ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    if (!c.logits) continue;
    float* lg = logits.data() + first_row[i] * n_vocab;
    const bool finished =
        c.n_draft > 0 ? on_verify(*c.seq, std::span<const float>(lg, static_cast<size_t>((1 + c.n_draft) * n_vocab)))
                      : push_token(*c.seq, sampled[i],
                                   c.seq->request.top_logprobs >= 0 ? std::span<const float>(raw_rows[i])
                                                                    : std::span<const float>());
    if (finished) done.push_back(c.seq->id);
  }
  for (uint64_t id : done) live.erase(id);
  pacer.observe(seconds(Sequence::Clock::now() - t0), plan.n_decode, n_prefill);
  return n_prefill;
}

bool Engine::Impl::push_token(Sequence& s, int32_t tok, std::span<const float> raw_logits) {
  const CompletionRequest& r = s.request;
  StreamEvent ev;
  if (r.top_logprobs >= 0) {
    ev.logprobs.push_back(token_logprobs(raw_logits, tok, r.top_logprobs, top));
    ev.top_logprobs.push_back(top);
  }
  s.tokens.push_back(tok);
  ++generated;

  const auto now = Sequence::Clock::now();
  {
    std::lock_guard<std::mutex> lk(metrics_mu);
    if (s.n_generated() == 1) ttft.observe(seconds(now - s.arrival));
    else itl.observe(seconds(now - s.last_token));
  }
  s.last_token = now;

  ev.tokens.push_back(tok);
  std::string reason;
  if (!r.ignore_eos && lm.tokenizer->is_eog(tok)) {
    reason = "stop";
    ev.text = s.stop->push(s.decoder->flush());
    if (!s.stop->matched()) ev.text += s.stop->flush();
  } else {
    ev.text = s.stop->push(s.decoder->push(tok));
    if (s.stop->matched()) reason = "stop";
  }
  if (reason.empty() && (s.n_generated() >= r.max_tokens ||
                         static_cast<int64_t>(s.tokens.size()) >= cfg.n_ctx)) {
    reason = "length";
    ev.text += s.stop->push(s.decoder->flush());
    if (s.stop->matched()) reason = "stop";
    else ev.text += s.stop->flush();
  }
  if (reason.empty()) {
    emit(s, ev);
    return false;
  }
  finish(s, ev, reason);
  return true;
}

void Engine::Impl::update_metrics() {
  std::lock_guard<std::mutex> lk(metrics_mu);
  {
    std::lock_guard<std::mutex> lk2(mu);
    waiting_in_sched = static_cast<int64_t>(sched.waiting().size());
    m.queue_depth = waiting_in_sched + static_cast<int64_t>(incoming.size());
    m.requests_total = submitted;
    m.requests_rejected = rejected;
  }
  m.requests_finished = finished;
  m.requests_cancelled = cancelled;
  m.generated_tokens_total = generated;
  m.prompt_tokens_total = prompt_tokens;
  m.prefix_cache_queries = sched.prefix_queries();
  m.prefix_cache_hits = sched.prefix_hits();
  m.preemptions_total = sched.preemptions();
  m.spec_drafted_total = spec_drafted;
  m.spec_accepted_total = spec_accepted;
  m.spec_drafted_beside_total = spec_drafted_beside;
  m.running = static_cast<int64_t>(sched.running().size());
  m.kv_blocks_total = pool.n_blocks();
  m.kv_blocks_used = pool.n_used();
  m.kv_blocks_cached = pool.n_cached();
  m.latency_buckets = ttft.bounds;
  m.ttft_counts = ttft.cumulative();
  m.itl_counts = itl.cumulative();
  m.ttft_sum = ttft.sum;
  m.itl_sum = itl.sum;
  m.ttft_count = ttft.count;
  m.itl_count = itl.count;
}

Engine::Engine(LoadedModel& model, const EngineConfig& config)
    : impl_(std::make_unique<Impl>(model, config)) {}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

uint64_t Engine::submit(CompletionRequest request, std::function<void(const StreamEvent&)> on_event) {
  Impl& I = *impl_;
  const int64_t n_vocab = I.lm.model->config().n_vocab;
  if (request.prompt.empty()) fail("the prompt is empty: at least one token is needed");
  if (static_cast<int64_t>(request.prompt.size()) + 1 > I.cfg.n_ctx)
    fail("the prompt has {} tokens but the context holds {} (prompt + at least one generated "
         "token)", request.prompt.size(), I.cfg.n_ctx);
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] < 0 || request.prompt[i] >= n_vocab)
      fail("prompt token {} has id {}, outside the vocabulary [0, {})", i, request.prompt[i], n_vocab);
  if (request.max_tokens < 1) fail("max_tokens must be >= 1, got {}", request.max_tokens);
  if (request.top_logprobs < -1 || request.top_logprobs > 20)
    fail("top_logprobs must be between 0 and 20, got {}", request.top_logprobs);
  for (const std::string& s : request.stop)
    if (s.empty()) fail("a stop string is empty");
  request.sampling.validate(I.lm.model->config().n_vocab);
  SpecOptions spec = request.speculative.value_or(I.cfg.speculative);
  const bool needs_draft = spec.method == "draft" || spec.method == "smc";
  spec.draft_model = needs_draft ? I.cfg.speculative.draft_model : "";
  spec.draft_vocab = spec.method == "draft" ? I.cfg.speculative.draft_vocab : 0;
  if (needs_draft && !I.draft)
    fail("speculative method '{}' needs a draft model: start the server with --draft MODEL", spec.method);
  spec.validate();
  if (spec.method == "smc") {
    if (!(request.sampling.temperature > 0))
      fail("speculative method 'smc' reweights sampled particles: it needs temperature > 0");
    if (!I.lm.model->uses_kv_blocks()) fail("speculative method 'smc' needs the CPU model");
    if (static_cast<int64_t>(request.prompt.size()) + spec.k + 1 >= I.cfg.n_ctx)
      fail("the prompt has {} tokens; with speculative k {} SMC-SD does not fit the context of {}",
           request.prompt.size(), spec.k, I.cfg.n_ctx);
    if (request.top_logprobs >= 0) fail("speculative method 'smc' does not give logprobs");
  } else if (spec.enabled() && I.kv.evicting())
    fail("speculative decoding ({}) cannot be combined with token eviction (the server runs with "
         "--kv-evict)", spec.method);

  auto s = std::make_unique<Sequence>();
  if (spec.method == "smc") {
    s->smc = spec;
  } else if (spec.method == "draft") {
    s->draft_sampler.emplace(draft_sampling(request.sampling));
    s->draft_len.emplace(spec.k);
  } else if (spec.enabled()) {
    s->draft = make_draft_source(spec, *I.lm.tokenizer);
    s->draft->begin(request.sampling);
    s->draft_len.emplace(spec.k);
  }
  s->tokens = request.prompt;
  s->n_prompt = static_cast<int64_t>(request.prompt.size());
  s->sampler.emplace(request.sampling);
  s->decoder.emplace(*I.lm.tokenizer);
  s->stop.emplace(request.stop);
  s->on_event = std::move(on_event);
  s->arrival = Sequence::Clock::now();
  s->request = std::move(request);
  uint64_t id;
  {
    std::lock_guard<std::mutex> lk(I.mu);
    if (I.stopping) {
      ++I.rejected;
      throw EngineBusy("the engine is shutting down", true);
    }
    if (static_cast<int64_t>(I.incoming.size()) + I.waiting_in_sched >= I.cfg.max_queue) {
      ++I.rejected;
      throw EngineBusy(fmt::format("too many waiting requests (the queue holds {})", I.cfg.max_queue),
                       false);
    }
    id = I.next_id++;
    s->id = id;
    ++I.submitted;
    I.incoming.push_back(std::move(s));
  }
  I.cv.notify_all();
  return id;
}

void Engine::cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->cancels.push_back(id);
  }
  impl_->cv.notify_all();
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lk(impl_->metrics_mu);
  return impl_->m;
}

const EngineConfig& Engine::config() const { return impl_->cfg; }
const Tokenizer& Engine::tokenizer() const { return *impl_->lm.tokenizer; }
const ModelConfig& Engine::model_config() const { return impl_->lm.model->config(); }

}  // namespace brisk
