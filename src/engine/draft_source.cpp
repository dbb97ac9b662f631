#include "engine/draft_source.h"

#include "engine/draft_model.h"
#include "engine/prompt_lookup.h"
#include "engine/racer_draft.h"
#include "util/error.h"

namespace brisk {

void SpecOptions::validate() const {
  if (method != "none" && method != "lookup" && method != "racer" && method != "draft" && method != "smc")
    fail("--spec must be none, lookup, racer, draft or smc, got '{}'", method);
  const bool needs_draft = method == "draft" || method == "smc";
  if (needs_draft && draft_model.empty())
    fail("--spec {} needs the draft model: --draft MODEL (a GGUF file or HF folder with the "
         "target's tokenizer)", method);
  if (!needs_draft && !draft_model.empty())
    fail("--draft is only used with --spec draft or smc (got --spec {})", method);
  if (draft_vocab < 0) fail("--draft-vocab must be >= 0 (0: the whole vocabulary), got {}", draft_vocab);
  if (draft_vocab > 0 && method != "draft") fail("--draft-vocab trims the draft model's vocabulary: it needs --spec draft");
  if (k < 1 || k > 64) fail("--spec-k must be in [1, 64], got {}", k);
  if (particles < 1 || particles > 64) fail("--spec-particles must be in [1, 64], got {}", particles);
}

std::unique_ptr<DraftSource> make_draft_source(const SpecOptions& opt, const Tokenizer& tokenizer) {
  opt.validate();
  if (opt.method == "lookup") return std::make_unique<PromptLookupDraft>();
  if (opt.method == "racer") return std::make_unique<RacerDraft>();
  if (opt.method == "draft") return std::make_unique<DraftModelSource>(opt.draft_model, tokenizer, opt.draft_vocab);
  return nullptr;
}

}  // namespace brisk
