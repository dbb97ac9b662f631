// The engine thread: takes submitted requests and cancellations from the other threads,
// asks the scheduler for each step's plan, runs the plan as one ragged batch through the
// model, samples the sequences whose last token was computed, streams their events, and
// frees the blocks of whatever finished.
#include "engine/engine.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "engine/batched_draft_model.h"
#include "engine/draft_model.h"
#include "engine/goodput_draft_cap.h"
#include "engine/latency_histogram.h"
#include "engine/logprobs.h"
#include "engine/prefill_pacer.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/smc_decoder.h"
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
  if (spec.method != "draft") spec.draft_model.clear();  // loaded for the requests that ask
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

struct Engine::Impl {
  LoadedModel& lm;
  EngineConfig cfg;
  KvCache kv;
  BlockPool pool;
  Scheduler sched;
  PrefillPacer pacer;

  // Shared with other threads (guarded by mu).
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Sequence>> incoming;
  std::vector<uint64_t> cancels;
  bool stopping = false;
  int64_t waiting_in_sched = 0;  // published by the engine thread for the queue limit
  uint64_t next_id = 1;
  uint64_t rejected = 0, submitted = 0;

  mutable std::mutex metrics_mu;
  EngineMetrics m;
  LatencyHistogram ttft, itl;

  // Engine thread only.
  std::unordered_map<uint64_t, std::unique_ptr<Sequence>> live;
  Batch batch;
  std::vector<float> logits;
  std::vector<TokenLogprob> top;
  std::vector<float> raw;
  uint64_t finished = 0, cancelled = 0, prompt_tokens = 0, generated = 0;
  uint64_t spec_drafted = 0, spec_accepted = 0, spec_drafted_beside = 0;

  std::thread thread;

  std::shared_ptr<const LoadedModel> draft;  // the shared draft model, if any
  std::unique_ptr<BatchedDraftModel> drafter;  // drafts the "draft" requests (made on first use)
  GoodputDraftCap draft_cap;                   // most guesses per sequence, per step

  // SMC-SD requests (engine thread only): one runs at a time, on its own caches.
  std::deque<Sequence*> smc_waiting;
  Sequence* smc_seq = nullptr;
  std::unique_ptr<SmcDecoder> smc;

  Impl(LoadedModel& model, const EngineConfig& config)
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
      auto d = std::make_shared<const LoadedModel>(load_for_generation(cfg.speculative.draft_model));
      check_same_vocabulary(*d->tokenizer, *model.tokenizer, cfg.speculative.draft_model);
      draft = std::move(d);
    }
    if (cfg.spec_overlap) ThreadPool::global();  // made here, not first by the drafter thread
    update_metrics();
    thread = std::thread([this] { loop(); });
  }

  void loop() {
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

  void finish(Sequence& s, StreamEvent& ev, const std::string& reason, const std::string& error = {}) {
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

  void emit(Sequence& s, const StreamEvent& ev) {
    try {
      if (s.on_event) s.on_event(ev);
    } catch (...) {
      // A throwing callback must not take the engine down; the request goes on.
    }
  }

  void cancel_now(uint64_t id) {
    auto it = live.find(id);
    if (it == live.end()) return;
    Sequence& s = *it->second;
    if (&s == smc_seq) smc_seq = nullptr, smc.reset();
    std::erase(smc_waiting, &s);
    StreamEvent ev;  // text not shown yet (held back) is dropped: the client is gone
    finish(s, ev, "cancelled");
    live.erase(it);
  }

  // One step of the SMC-SD request in progress (starting the next waiting one first). Its
  // target passes use the engine's model between the batches; the winning particle is
  // known only at the end, so its tokens are streamed then.
  void step_smc() {
    if (!smc_seq && smc_waiting.empty()) return;
    Sequence* s = smc_seq ? smc_seq : smc_waiting.front();
    try {
      if (!smc_seq) {
        smc_waiting.pop_front();
        smc_seq = s;
        smc = std::make_unique<SmcDecoder>(*lm.model, *lm.tokenizer, draft, s->smc->particles, s->smc->k,
                                           cfg.n_ctx);
        GenerateOptions opt;
        opt.max_tokens = s->request.max_tokens;
        opt.ignore_eos = s->request.ignore_eos;
        opt.sampling = s->request.sampling;
        smc->start(s->tokens, opt);
      }
      if (smc->step()) return;
      const GenerateResult r = smc->result();
      smc_seq = nullptr;
      smc.reset();
      spec_drafted += static_cast<uint64_t>(r.timings.drafted);
      bool finished = false;
      for (int32_t tok : r.tokens)
        if ((finished = push_token(*s, tok, {}))) break;
      if (!finished) {  // the context filled up before max_tokens
        StreamEvent ev;
        ev.text = s->stop->push(s->decoder->flush()) + s->stop->flush();
        finish(*s, ev, "length");
      }
    } catch (const std::exception& e) {
      smc_seq = nullptr;
      smc.reset();
      StreamEvent ev;
      finish(*s, ev, "error", e.what());
    }
    live.erase(s->id);
  }

  // Guesses for the running sequences about to decode one token that have none yet,
  // capped so the step fits the context (and the draft's) and yields no more tokens than
  // the request still wants, and by draft_cap (the best measured goodput at this many
  // speculative sequences); returns how many there are (0: draft_cap not asked). Retrieval drafters propose here; the draft model's sequences
  // are drafted together: `now` before the step's target pass, `beside` (MineDraft
  // overlap) during it, on another thread. Overlap balances the two groups: the
  // sequences holding guesses drafted beside the last step are verified in this one, and
  // of those needing guesses, as many are drafted now as make the groups even (all of
  // them without overlap).
  int plan_drafts(std::vector<DraftRequest>& now, std::vector<DraftRequest>& beside) {
    std::vector<DraftRequest> model;
    size_t ready = 0;
    int n_spec = 0;
    for (Sequence* s : sched.running()) n_spec += s->speculative() && s->n_pending() == 1;
    const int cap = n_spec > 0 ? draft_cap.choose(n_spec) : 0;
    for (Sequence* s : sched.running()) {
      if (!s->speculative()) continue;
      if (s->n_pending() != 1) {
        s->drafts.clear();
        continue;
      }
      if (!s->drafts.empty()) {  // drafted beside the last step, or not scheduled in it
        ready += s->draft_sampler ? 1 : 0;
        continue;
      }
      const int64_t n = static_cast<int64_t>(s->tokens.size());
      int64_t room = std::min<int64_t>(cfg.n_ctx - n, s->request.max_tokens - s->n_generated() - 1);
      if (s->draft_sampler) {
        if (!drafter) drafter = std::make_unique<BatchedDraftModel>(draft, cfg.max_running, cfg.n_ctx);
        room = std::min(room, drafter->capacity() - n);
      }
      const int k = static_cast<int>(std::min<int64_t>({s->draft_len->next(), room, cap}));
      if (k <= 0) continue;
      if (s->draft) {
        s->drafts = s->draft->propose(s->tokens, k);
        if (static_cast<int>(s->drafts.size()) > k) s->drafts.resize(k);
      } else {
        model.push_back({s->slot, s->tokens, k, &*s->draft_sampler, &s->drafts});
      }
    }
    const size_t n_now = !cfg.spec_overlap ? model.size()
                         : model.size() > ready ? (model.size() - ready + 1) / 2 : 0;
    now.assign(model.begin(), model.begin() + static_cast<std::ptrdiff_t>(n_now));
    beside.assign(model.begin() + static_cast<std::ptrdiff_t>(n_now), model.end());
    return n_spec;
  }

  // Ends the sequences whose drafting failed (a bug, not a bad request).
  void fail_drafted(std::span<Sequence* const> seqs, const char* what) {
    for (Sequence* s : seqs) {
      s->drafting = false;
      StreamEvent ev;
      const uint64_t id = s->id;
      finish(*s, ev, "error", what);
      live.erase(id);
    }
  }

  Sequence* seq_in_slot(int slot) {
    for (Sequence* s : sched.running())
      if (s->slot == slot) return s;
    return nullptr;
  }

  // One engine step: drafting, the target's batch, verification. A step of decodes only
  // (no prompt chunk) with speculative sequences tells draft_cap the goodput of its cap.
  void step() {
    const auto t0 = Sequence::Clock::now();
    const uint64_t generated_before = generated;
    std::vector<DraftRequest> now, beside;
    const int n_spec = plan_drafts(now, beside);
    const int64_t n_prefill = draft_and_run(t0, now, beside);
    if (n_spec > 0 && n_prefill == 0)
      draft_cap.observe(static_cast<int64_t>(generated - generated_before), seconds(Sequence::Clock::now() - t0));
  }

  // Drafts `now`, then runs the target's batch while the drafter drafts `beside`; returns
  // the batch's prompt tokens (-1: nothing ran).
  int64_t draft_and_run(Sequence::Clock::time_point t0, std::vector<DraftRequest>& now,
                        std::vector<DraftRequest>& beside) {
    if (!now.empty()) {
      try {
        drafter->propose(now);
      } catch (const std::exception& e) {
        std::vector<Sequence*> seqs;
        for (const DraftRequest& r : now) seqs.push_back(seq_in_slot(r.slot));
        fail_drafted(seqs, e.what());
      }
    }
    if (beside.empty()) return run_batch(t0);
    // MineDraft overlap: the drafter thread reads only its requests' tokens (which this
    // step leaves alone: their sequences are not scheduled) and writes only `out` and its
    // own cache; it runs on that thread alone (ThreadPool::Serial), so the target's pass
    // has the global pool to itself.
    std::vector<Sequence*> seqs;
    std::vector<std::vector<DraftToken>> out(beside.size());
    for (size_t i = 0; i < beside.size(); ++i) {
      seqs.push_back(seq_in_slot(beside[i].slot));
      seqs.back()->drafting = true;
      beside[i].out = &out[i];
    }
    auto job = std::async(std::launch::async, [&] { drafter->propose(beside, true); });
    const int64_t n_prefill = run_batch(t0);
    try {
      job.get();
    } catch (const std::exception& e) {
      fail_drafted(seqs, e.what());
      return -1;
    }
    for (size_t i = 0; i < seqs.size(); ++i) {
      Sequence* s = seqs[i];
      s->drafting = false;
      // Preempted meanwhile (its slot may be another's now): the guesses are dropped.
      if (s->running() && s->slot == beside[i].slot && s->n_pending() == 1) {
        spec_drafted_beside += out[i].size();
        s->drafts = std::move(out[i]);
      }
    }
    return n_prefill;
  }

  // Schedules and runs one ragged batch through the target, then samples or verifies;
  // returns its prompt tokens (-1: nothing ran, or the pass failed).
  int64_t run_batch(Sequence::Clock::time_point t0) {
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
    int64_t row = 0;
    std::vector<uint64_t> done;
    for (const ScheduledChunk& c : plan.chunks) {
      if (!c.logits) continue;
      float* lg = logits.data() + row * n_vocab;
      row += 1 + c.n_draft;
      const bool finished =
          c.n_draft > 0
              ? on_verify(*c.seq, std::span<const float>(lg, static_cast<size_t>((1 + c.n_draft) * n_vocab)))
              : on_token(*c.seq, std::span<float>(lg, static_cast<size_t>(n_vocab)));
      if (finished) done.push_back(c.seq->id);
    }
    for (uint64_t id : done) live.erase(id);
    pacer.observe(seconds(Sequence::Clock::now() - t0), plan.n_decode, n_prefill);
    return n_prefill;
  }

  // Samples the next token from `lg`, streams it; true when the sequence finished.
  bool on_token(Sequence& s, std::span<float> lg) {
    // Logprobs come from the raw logits; the sampler changes them in place.
    if (s.request.top_logprobs >= 0) raw.assign(lg.begin(), lg.end());
    const int32_t tok = s.sampler->sample(lg, s.tokens);
    return push_token(s, tok, raw);
  }

  // Verifies s's guesses against `rows` (its last token's logits, then each guess's),
  // rolls the K/V of rejected ones back, and streams the accepted ones plus the token
  // verification draws; true when the sequence finished.
  bool on_verify(Sequence& s, std::span<const float> rows) {
    const int64_t n_vocab = lm.model->config().n_vocab;
    const size_t before = s.tokens.size();
    const int accepted = verify_drafts(*s.sampler, rows, n_vocab, s.drafts, s.tokens);
    std::vector<int32_t> fed = {s.tokens[before - 1]};
    for (int i = 0; i < accepted; ++i) fed.push_back(s.drafts[static_cast<size_t>(i)].id);
    if (s.draft) s.draft->observe(fed, rows.first(static_cast<size_t>((accepted + 1) * n_vocab)), n_vocab);
    s.draft_len->update(static_cast<int>(s.drafts.size()), accepted);
    spec_drafted += s.drafts.size();
    spec_accepted += static_cast<uint64_t>(accepted);
    s.drafts.clear();
    s.n_computed += accepted;
    kv.truncate(s.slot, s.n_computed);  // the rejected guesses' K/V rolled back
    const std::vector<int32_t> fresh(s.tokens.begin() + static_cast<std::ptrdiff_t>(before), s.tokens.end());
    s.tokens.resize(before);
    for (size_t j = 0; j < fresh.size(); ++j)
      if (push_token(s, fresh[j], rows.subspan(j * n_vocab, static_cast<size_t>(n_vocab)))) return true;
    return false;
  }

  // Appends `tok` (sampled from `raw_logits`, read only for logprobs) and streams it;
  // true when the sequence finished.
  bool push_token(Sequence& s, int32_t tok, std::span<const float> raw_logits) {
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

  void update_metrics() {
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
};

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
  request.sampling.validate();
  SpecOptions spec = request.speculative.value_or(I.cfg.speculative);
  const bool needs_draft = spec.method == "draft" || spec.method == "smc";
  spec.draft_model = needs_draft ? I.cfg.speculative.draft_model : "";
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
