// Single-sequence generation: prompt ids -> prefill -> sample/decode loop, streaming text.
// The generator keeps its KV cache between calls and reuses the longest common prefix of
// the previous tokens and the new prompt, so a chat turn only prefills what is new.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/draft_source.h"
#include "engine/sampler.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace brisk {

struct GenerateOptions {
  int max_tokens = 128;
  bool ignore_eos = false;
  SamplingParams sampling;
  int n_batch = 512;  // prompt tokens per forward pass
  // Speculative decoding (engine/speculative_decoder.h): guesses from `draft`, at most
  // spec_k per step, verified exactly. nullptr: one token per forward pass.
  DraftSource* draft = nullptr;
  int spec_k = 4;
};

struct Timings {
  int prompt_tokens = 0;      // prompt tokens actually computed (after prefix reuse)
  double prompt_ms = 0;
  int decode_steps = 0;       // target forward passes after the prompt
  int decode_tokens = 0;      // tokens they produced (= decode_steps without speculation)
  double decode_ms = 0;
  int drafted = 0;            // speculative guesses verified
  int accepted = 0;           // of which accepted
  double prompt_tps() const { return prompt_ms > 0 ? prompt_tokens * 1e3 / prompt_ms : 0; }
  double decode_tps() const { return decode_ms > 0 ? decode_tokens * 1e3 / decode_ms : 0; }
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (an end-of-generation token included)
  std::string text;             // their text (control tokens not rendered)
  std::string finish_reason;    // "stop" (end-of-generation token), "length" (max_tokens or context full)
  Timings timings;
};

class Generator {
 public:
  Generator(Model& model, const Tokenizer& tokenizer, int64_t n_ctx);

  int64_t n_ctx() const { return cache_.capacity(); }

  // on_text receives text pieces as they complete (never a partial UTF-8 character).
  GenerateResult generate(const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                          const std::function<void(const std::string&)>& on_text = {});

 private:
  // Feeds tokens after the reusable prefix; returns the logits of the last token.
  std::vector<float> prefill(const std::vector<int32_t>& prompt, int n_batch, Timings& t);

  Model& model_;
  const Tokenizer& tok_;
  KvCache cache_;
  std::vector<int32_t> cached_;  // tokens whose K/V are in slot 0 of the cache
};

}  // namespace brisk
