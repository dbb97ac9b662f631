// `brisk bench --spec METHODS --spec-prompts FILES`: speculative decoding against plain
// decoding on the same model in the same run. For every prompt file and repetition, plain
// greedy decoding and each method run back to back (interleaved, so machine noise hits
// them alike); rows give per method and prompt: acceptance rate (accepted / drafted
// guesses), mean accepted length (tokens per target pass, accepted guesses + 1),
// decode tokens/s (median) and the speedup (median of the per-repetition ratios to the
// plain run beside it), and whether the output equals the plain output (greedy must).
// smc (approximate SMC-SD) samples (--temp, default 0.8; seeds 1..reps): it is compared
// with plain sampling at the same settings, and both rows also give the perplexity of
// their output under the target (its quality cost).
#pragma once
#include <string>
#include <vector>

#include "engine/draft_source.h"

namespace brisk {

struct SpecBenchOptions {
  std::string model;
  std::vector<std::string> methods;  // lookup, racer, draft
  std::string draft_model;
  int64_t draft_vocab = 0;  // --draft-vocab for draft
  int k = 4;
  int particles = 4;
  float temperature = 0.8f;  // smc and its plain baseline
  std::vector<std::string> prompt_files;
  int n_gen = 128;
  int reps = 5;
  int threads = 0;
  bool json = false;
};

int run_spec_bench(const SpecBenchOptions& o);

}  // namespace brisk
