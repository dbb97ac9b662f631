#include "engine/draft_vocabulary.h"

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace brisk {

std::vector<int32_t> draft_vocabulary(const Tokenizer& tok, int64_t n) {
  if (n < 0) fail("--draft-vocab must be >= 0 (0: the whole vocabulary), got {}", n);
  const int32_t n_vocab = tok.n_vocab();
  if (n == 0 || n >= n_vocab) return {};
  std::vector<int32_t> keep;
  for (int32_t id = 0; id < n_vocab; ++id)
    if (tok.is_eog(id)) keep.push_back(id);
  for (int32_t id = 0; id < n_vocab && static_cast<int64_t>(keep.size()) < n; ++id)
    if (!tok.is_eog(id)) keep.push_back(id);
  keep.resize(static_cast<size_t>(n));  // (more end-of-generation tokens than n)
  return keep;
}

}  // namespace brisk
