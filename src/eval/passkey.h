// Retrieval from far back in the context (what KV compression and eviction can break):
//  - passkey (Mohtashami & Jaggi, "Landmark Attention", arXiv 2305.16300): a 5-digit
//    number hidden at a given depth of repetitive filler text, asked for at the end;
//  - multi-key needle (n_keys > 1, after RULER's multi-key NIAH, arXiv 2404.06654): several
//    named numbers hidden at random depths, one of them asked for.
// The answer is decoded greedily, or by an answerer given (sampling, speculative decoding:
// the task accuracy of SMC-SD, docs/benchmarks.md); a trial counts when the first number
// generated is the key.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace brisk {

struct PasskeyCell {
  int64_t length = 0;   // prompt tokens (about)
  double depth = 0;     // where the (asked-for) key sits, 0 = start, 1 = end
  int64_t correct = 0, trials = 0;
  std::string outcomes;  // '1' (retrieved) or '0' per trial, in order: paired comparisons
};

struct PasskeyResult {
  std::vector<PasskeyCell> cells;  // lengths x depths
  int64_t correct = 0, trials = 0;
  double accuracy() const { return trials ? static_cast<double>(correct) / trials : 0; }
};

// The first n_new tokens after `prompt`; `trial` numbers the prompts of a run (0, 1, ...:
// e.g. a sampling seed per trial).
using PasskeyAnswerer =
    std::function<std::vector<int32_t>(const std::vector<int32_t>& prompt, int64_t n_new, int64_t trial)>;

// Every length must leave room for the key and question (at least 64 tokens) and fit the
// model's cache type (model.cache_shape). Deterministic for a seed.
PasskeyResult passkey_eval(Model& model, const Tokenizer& tok, const std::vector<int64_t>& lengths,
                           const std::vector<double>& depths, int64_t trials, int64_t n_keys,
                           uint64_t seed, const PasskeyAnswerer& answer = {});

}  // namespace brisk
