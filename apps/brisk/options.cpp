#include "options.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <random>
#include <sstream>

#include "command.h"
#include "util/error.h"
#include "util/thread_pool.h"
#include "util/utf8.h"

namespace brisk {

void ModelOptions::add_to(CLI::App& app) {
  app.add_option("-m,--model", model, "GGUF file or Hugging Face folder (default: bundled model)");
  app.add_option("-t,--threads", threads, "threads (default: all cores)");
  app.add_option("-c,--ctx", ctx, "context size in tokens (default: the model's, at most 4096)");
  app.add_option("--device", device, "cpu or cuda (default cpu)");
  add_kv_options(app, kv_type, kv_evict);
}

void add_kv_options(CLI::App& app, std::string& kv_type, std::string& kv_evict) {
  app.add_option("--kv-type", kv_type,
                 "KV cache storage: f32 (exact, default), f16, int8, int4, int4r (int4 after a "
                 "Hadamard rotation), kivi4 (KIVI: 4-bit K per channel, V per token) or nsn2 "
                 "(2-bit vector quantization); --device cuda stores f32 (as f16), f16, int8, int4, int4r "
                 "and nsn2; see docs/techniques.md");
  app.add_option("--kv-evict", kv_evict,
                 "token eviction: none (default), refree, streaming:B, h2o:B, snapkv:B or tova:B, B a "
                 "fraction of the sequence or a token count, or plan:FILE (per-layer KV type and "
                 "kept share, from brisk calibrate); see docs/techniques.md");
}

std::string ModelOptions::path() const { return model.empty() ? default_model_path() : model; }

void ModelOptions::apply_threads() const {
  if (threads < 0) fail("-t/--threads must be >= 0 (0 = all cores), got {}", threads);
  ThreadPool::set_global_threads(threads);
}

int64_t ModelOptions::context_for(int64_t n_ctx_train) const {
  if (ctx < 0) fail("-c/--ctx must be >= 0, got {}", ctx);
  if (ctx > 0) return ctx;
  return std::min<int64_t>(n_ctx_train > 0 ? n_ctx_train : 4096, 4096);
}

void add_sampling_options(CLI::App& app, SamplingParams& p, bool& seed_given, const std::string& seed_option) {
  app.add_option("--temp", p.temperature, "temperature (0 = greedy)");
  app.add_option("--top-k", p.top_k, "keep the k most likely tokens (0 = all)");
  app.add_option("--top-p", p.top_p, "nucleus sampling mass (1 = off)");
  app.add_option("--min-p", p.min_p, "drop tokens below min-p times the top probability (0 = off)");
  app.add_option("--repeat-penalty", p.repeat_penalty, "penalty on recent tokens (1 = off)");
  app.add_option("--repeat-last-n", p.repeat_last_n, "tokens the repeat penalty looks at");
  app.add_option("--frequency-penalty", p.frequency_penalty, "OpenAI frequency penalty");
  app.add_option("--presence-penalty", p.presence_penalty, "OpenAI presence penalty");
  app.add_option_function<std::vector<std::string>>(
         "--logit-bias",
         [&](const std::vector<std::string>& v) {
           for (const std::string& b : v) p.logit_bias.push_back(parse_logit_bias(b));
         },
         "add BIAS to token ID's logit: ID+BIAS or ID-BIAS, BIAS up to 100 (repeatable)")
      ->take_all();
  app.add_option_function<uint64_t>(
      seed_option, [&](uint64_t s) { p.seed = s, seed_given = true; }, "random seed");
}

std::pair<int32_t, float> parse_logit_bias(const std::string& s) {
  const size_t sign = s.find_first_of("+-", 1);
  int32_t id = -1;
  float bias = 0;
  const char* end = s.data() + s.size();
  bool ok = sign != std::string::npos;
  if (ok) {
    auto r1 = std::from_chars(s.data(), s.data() + sign, id);
    auto r2 = std::from_chars(s.data() + sign + 1, end, bias);
    ok = r1.ec == std::errc() && r1.ptr == s.data() + sign && r2.ec == std::errc() && r2.ptr == end && id >= 0;
  }
  if (!ok) fail("--logit-bias wants ID+BIAS or ID-BIAS (e.g. 15043-100), got '{}'", s);
  return {id, s[sign] == '-' ? -bias : bias};
}

void add_spec_options(CLI::App& app, SpecOptions& s) {
  app.add_option("--spec", s.method,
                 "speculative decoding: none, lookup (n-gram prompt lookup), racer (retrieval + "
                 "copy-logit drafts), draft (a draft model, --draft) or smc (approximate SMC-SD "
                 "with --draft, needs --temp > 0)");
  app.add_option("--draft", s.draft_model, "draft model for --spec draft/smc (same tokenizer as -m)");
  app.add_option("--spec-k", s.k, "most tokens drafted per step (default 4; adapts below it)");
  app.add_option("--spec-particles", s.particles, "SMC-SD particles (default 4)");
  app.add_option("--draft-vocab", s.draft_vocab, kDraftVocabHelp);
}

uint64_t random_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

std::string read_scoring_text(const std::string& file) {
  std::ifstream f(file, std::ios::binary);
  if (!f) fail("cannot read '{}'", file);
  std::stringstream s;
  s << f.rdbuf();
  std::string text = s.str();
  require_utf8(text, "'" + file + "'");
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace brisk
