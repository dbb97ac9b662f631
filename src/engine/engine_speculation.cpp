// The engine's speculative side (Engine::Impl, engine_impl.h): guesses for the running
// sequences from their draft sources (the draft model batched over sequences, optionally
// beside the target's pass: MineDraft), their verification against the target's logits,
// and SMC-SD requests, which run one at a time on their own caches.
#include <algorithm>
#include <future>

#include "engine/draft_model.h"
#include "engine/engine_impl.h"
#include "engine/speculative_decoder.h"

namespace brisk {

void Engine::Impl::step_smc() {
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

int Engine::Impl::plan_drafts(std::vector<DraftRequest>& now, std::vector<DraftRequest>& beside) {
  std::vector<DraftRequest> model;
  size_t ready = 0;
  int n_spec = 0;
  bool prefilling = false;
  for (Sequence* s : sched.running()) {
    n_spec += s->speculative() && s->n_pending() == 1;
    prefilling = prefilling || s->n_pending() > 1;
  }
  // No guesses while a prompt is being prefilled: such a step is not measured, so a cap
  // still being tried would be tried again at every one of them (a wave of 16 new 128-token
  // requests spent ~150 steps drafting 8 guesses a sequence), and each new sequence's
  // prompt would go through the draft model too. The prompts' chunks take the step's
  // budget anyway (engine/prefill_pacer.h).
  if (prefilling) n_spec = 0;
  const int cap = n_spec > 0 ? draft_cap.choose(n_spec) : 0;
  const double saved = cap > 0 ? draft_cap.saved_per_token(n_spec) : -1;  // see below
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
      // Before its first guess the draft model reads the sequence's prompt (its last
      // BatchedDraftModel::kWindow tokens): where guesses pay at this load, start drafting
      // only if the tokens still to come can repay that, each saving the step time
      // measured at the best cap against plain decoding (4 requests of 1,024 prompt tokens
      // and 96 new ones: 0.62-0.73x of plain without this; docs/benchmarks.md, session 14).
      // Where plain decoding is best the cap is 0 anyway, and its re-tries must pay the
      // catch-up to be judged by it.
      const double per_token = drafter->catch_up_seconds_per_token();
      if (saved > 0 && per_token > 0) {
        const int64_t lag = drafter->lag(s->slot, s->tokens);
        if (lag > s->n_generated() && static_cast<double>(room) * saved < static_cast<double>(lag) * per_token)
          continue;
      }
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

void Engine::Impl::fail_drafted(std::span<Sequence* const> seqs, const char* what) {
  for (Sequence* s : seqs) {
    s->drafting = false;
    StreamEvent ev;
    const uint64_t id = s->id;
    finish(*s, ev, "error", what);
    live.erase(id);
  }
}

Sequence* Engine::Impl::seq_in_slot(int slot) {
  for (Sequence* s : sched.running())
    if (s->slot == slot) return s;
  return nullptr;
}

int64_t Engine::Impl::draft_and_run(Sequence::Clock::time_point t0, std::vector<DraftRequest>& now,
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

bool Engine::Impl::on_verify(Sequence& s, std::span<const float> rows) {
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

}  // namespace brisk
