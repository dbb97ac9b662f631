// Command-line options shared by the commands that load a model and generate.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "engine/draft_source.h"
#include "engine/sampler.h"
#include "model/cuda/cuda_model.h"

namespace brisk {

struct ModelOptions {
  std::string model;  // empty: the bundled default
  int threads = 0;    // 0: all cores
  int ctx = 0;        // 0: the model's training context, capped at 4096
  std::string device = "cpu";  // cpu | cuda
  std::string kv_type = "f32"; // --kv-type: how the KV cache stores K/V (kernels/kv_format.h)
  std::string kv_evict = "none";  // --kv-evict: token eviction (kv/token_eviction.h)

  void add_to(CLI::App& app);
  std::string path() const;
  void apply_threads() const;
  int64_t context_for(int64_t n_ctx_train) const;
  Device device_kind() const { return parse_device(device); }
  // Sets the model's KV type and eviction from --kv-type and --kv-evict (throws
  // brisk::Error for a bad spelling).
  void apply_kv(Model& m) const {
    m.set_kv_type(parse_kv_type(kv_type));
    m.set_kv_evict(kv_evict);
  }
};

// --kv-type and --kv-evict, spelled the same by every command (run, serve, bench, eval, ...).
void add_kv_options(CLI::App& app, std::string& kv_type, std::string& kv_evict);

// The text of a UTF-8 file to score, with one trailing newline dropped as llama-perplexity
// does (brisk ppl, brisk eval); brisk::Error naming the file when unreadable or not UTF-8.
std::string read_scoring_text(const std::string& file);

// `seed_option`: the seed's spelling (brisk eval's --seed seeds its task: --sample-seed).
void add_sampling_options(CLI::App& app, SamplingParams& p, bool& seed_given,
                          const std::string& seed_option = "--seed");
// One --logit-bias value: "ID+BIAS" or "ID-BIAS" (llama.cpp's spelling) as (id, bias).
std::pair<int32_t, float> parse_logit_bias(const std::string& s);
// --draft-vocab's help (brisk run, bench and serve).
inline constexpr const char* kDraftVocabHelp =
    "the draft model computes logits for N tokens only, the first N ids (BPE merge order: the most "
    "frequent first; FR-Spec); 0: all (default)";

// --spec none|lookup|racer|draft|smc, --draft MODEL, --spec-k K, --spec-particles N, --draft-vocab N.
void add_spec_options(CLI::App& app, SpecOptions& s);

// A seed from the system's entropy when none was given (reported back in --json).
uint64_t random_seed();

}  // namespace brisk
