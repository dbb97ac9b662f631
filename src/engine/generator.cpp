#include "engine/generator.h"

#include <algorithm>
#include <chrono>

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

  GenerateResult r;
  r.finish_reason = "length";
  Sampler sampler(opt.sampling);
  StreamDecoder decoder(tok_);
  std::vector<float> logits = prefill(prompt, opt.n_batch, r.timings);
  const int64_t n_vocab = model_.config().n_vocab;

  std::vector<int32_t> history = prompt;
  auto t0 = std::chrono::steady_clock::now();
  Batch batch;
  for (int i = 0; i < opt.max_tokens; ++i) {
    int32_t tok = sampler.sample(std::span<float>(logits.data(), n_vocab), history);
    r.tokens.push_back(tok);
    history.push_back(tok);
    std::string piece = decoder.push(tok);
    r.text += piece;
    if (on_text && !piece.empty()) on_text(piece);
    if (!opt.ignore_eos && tok_.is_eog(tok)) {
      r.finish_reason = "stop";
      break;
    }
    if (i + 1 == opt.max_tokens || static_cast<int64_t>(cached_.size()) + 1 >= n_ctx()) break;
    batch.clear();
    batch.add(tok, static_cast<int32_t>(cached_.size()), 0, true);
    model_.forward(batch, cache_, logits);
    cached_.push_back(tok);
    ++r.timings.decode_steps;
  }
  r.timings.decode_ms = ms_since(t0);
  std::string rest = decoder.flush();
  r.text += rest;
  if (on_text && !rest.empty()) on_text(rest);
  return r;
}

}  // namespace brisk
