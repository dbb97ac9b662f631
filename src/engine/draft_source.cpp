#include "engine/draft_source.h"

#include "engine/draft_model.h"
#include "engine/prompt_lookup.h"
#include "engine/racer_draft.h"
#include "util/error.h"

namespace brisk {

void SpecOptions::validate() const {
  if (method != "none" && method != "lookup" && method != "racer" && method != "draft")
    fail("--spec must be none, lookup, racer or draft, got '{}'", method);
  if (method == "draft" && draft_model.empty())
    fail("--spec draft needs the draft model: --draft MODEL (a GGUF file or HF folder with the "
         "target's tokenizer)");
  if (method != "draft" && !draft_model.empty())
    fail("--draft is only used with --spec draft (got --spec {})", method);
  if (k < 1 || k > 64) fail("--spec-k must be in [1, 64], got {}", k);
}

std::unique_ptr<DraftSource> make_draft_source(const SpecOptions& opt, const Tokenizer& tokenizer) {
  opt.validate();
  if (opt.method == "lookup") return std::make_unique<PromptLookupDraft>();
  if (opt.method == "racer") return std::make_unique<RacerDraft>();
  if (opt.method == "draft") return std::make_unique<DraftModelSource>(opt.draft_model, tokenizer);
  return nullptr;
}

}  // namespace brisk
