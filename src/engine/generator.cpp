#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "engine/speculative_decoder.h"
#include "util/error.h"

namespace brisk {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Generator::Generator(Model& model, const Tokenizer& tokenizer, int64_t n_ctx)
    : model_(model), tok_(tokenizer), cache_(model.cache_shape(1, n_ctx)) {}

std::vector<float> Generator::prefill(const std::vector<int32_t>& prompt, int n_batch,
                                      Timings& t) {
  // Reuse the common prefix, but always recompute at least the last prompt token: its
  // logits are what the first sampled token needs.
  size_t keep = 0;
  while (keep < cached_.size() && keep + 1 < prompt.size() && cached_[keep] == prompt[keep]) ++keep;
  if (static_cast<int64_t>(keep) < cache_.compacted(0)) keep = 0;  // token eviction dropped some
  cache_.truncate(0, static_cast<int64_t>(keep));
  cached_.resize(keep);

  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits;
  Batch batch;
  for (size_t i = keep; i < prompt.size(); i += n_batch) {
    size_t end = std::min(prompt.size(), i + static_cast<size_t>(n_batch));
    batch.clear();
    for (size_t j = i; j < end; ++j)
      batch.add(prompt[j], static_cast<int32_t>(j), 0, j + 1 == prompt.size());
    model_.forward(batch, cache_, logits);
    cached_.insert(cached_.end(), prompt.begin() + i, prompt.begin() + end);
  }
  t.prompt_tokens = static_cast<int>(prompt.size() - keep);
  t.prompt_ms = ms_since(t0);
  return logits;
}

GenerateResult Generator::generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                                   const std::function<void(const std::string&)>& on_text) {
  if (prompt.empty()) fail("the prompt is empty: at least one token is needed");
  if (static_cast<int64_t>(prompt.size()) >= n_ctx())
    fail("the prompt has {} tokens but the context holds {} (raise it with -c/--ctx, up to "
         "the model's {})",
         prompt.size(), n_ctx(), model_.config().n_ctx_train);
  if (opt.max_tokens < 0) fail("max tokens must be >= 0, got {}", opt.max_tokens);
  if (opt.n_batch < 1) fail("batch size must be >= 1, got {}", opt.n_batch);
  opt.sampling.validate(model_.config().n_vocab);

  GenerateResult r;
  r.finish_reason = "length";
  Sampler sampler(opt.sampling);
  StreamDecoder decoder(tok_);
  std::vector<float> logits = prefill(prompt, opt.n_batch, r.timings);
  const int64_t n_vocab = model_.config().n_vocab;

  std::vector<int32_t> history = prompt;
  auto t0 = std::chrono::steady_clock::now();
  // Emits the token history[at]; false once generation must stop (end-of-generation token,
  // max_tokens, or the context full).
  auto emit = [&](size_t at) {
    int32_t tok = history[at];
    r.tokens.push_back(tok);
    std::string piece = decoder.push(tok);
    r.text += piece;
    if (on_text && !piece.empty()) on_text(piece);
    if (!opt.ignore_eos && tok_.is_eog(tok)) {
      r.finish_reason = "stop";
      return false;
    }
    return static_cast<int>(r.tokens.size()) < opt.max_tokens &&
           static_cast<int64_t>(at + 1) < n_ctx();
  };
  if (opt.max_tokens > 0) {
    history.push_back(sampler.sample(std::span<float>(logits.data(), n_vocab), history));
    bool more = emit(history.size() - 1);
    if (opt.draft) {
      opt.draft->begin(opt.sampling);
      SpeculativeDecoder spec(*opt.draft, opt.spec_k);
      while (more) {
        size_t at = history.size();
        spec.step(model_, cache_, 0, history, sampler);
        ++r.timings.decode_steps;
        while (more && at < history.size()) more = emit(at++);
        history.resize(at);  // tokens after a stop are dropped
      }
      r.timings.drafted = spec.stats().drafted;
      r.timings.accepted = spec.stats().accepted;
      // The cache holds all of history but its last token (less if a stop dropped some).
      cache_.truncate(0, static_cast<int64_t>(history.size()) - 1);
    } else {
      Batch batch;
      while (more) {
        batch.clear();
        batch.add(history.back(), static_cast<int32_t>(history.size() - 1), 0, true);
        model_.forward(batch, cache_, logits);
        ++r.timings.decode_steps;
        history.push_back(sampler.sample(std::span<float>(logits.data(), n_vocab), history));
        more = emit(history.size() - 1);
      }
    }
    r.timings.decode_tokens = static_cast<int>(r.tokens.size()) - 1;
    cached_.assign(history.begin(), history.end() - 1);
  }
  r.timings.decode_ms = ms_since(t0);
  std::string rest = decoder.flush();
  r.text += rest;
  if (on_text && !rest.empty()) on_text(rest);
  return r;
}

}  // namespace brisk
