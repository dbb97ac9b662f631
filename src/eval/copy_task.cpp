#include "eval/copy_task.h"

#include <algorithm>
#include <random>
#include <vector>

#include "util/error.h"

namespace brisk {

CopyResult copy_eval(Model& model, int64_t ctx, int64_t trials, int32_t first_id, uint64_t seed,
                     const std::vector<int32_t>& text) {
  const int64_t n_vocab = model.config().n_vocab, half = ctx / 2;
  if (half < 4) fail("copy task: context {} too short (at least 8 tokens)", ctx);
  if (first_id < 0 || first_id >= n_vocab) fail("copy task: first id {} outside the vocabulary", first_id);
  if (!text.empty() && static_cast<int64_t>(text.size()) < trials * half)
    fail("copy task: the text has {} tokens, {} trials of {} need {}", text.size(), trials, half,
         trials * half);
  std::mt19937_64 rng(seed);
  CopyResult r;
  KvCache cache(model.cache_shape(1, 2 * half));
  std::vector<float> logits;
  Batch b;
  for (int64_t t = 0; t < trials; ++t) {
    std::vector<int32_t> s(static_cast<size_t>(half));
    if (text.empty())
      for (int32_t& id : s) id = first_id + static_cast<int32_t>(rng() % (n_vocab - first_id));
    else
      std::copy(text.begin() + t * half, text.begin() + (t + 1) * half, s.begin());
    cache.clear(0);
    for (int64_t start = 0; start < 2 * half; start += 512) {
      b.clear();
      const int64_t end = std::min(2 * half, start + 512);
      // Logits from the first token of the second copy on (position half predicts s[1]).
      for (int64_t j = start; j < end; ++j)
        b.add(s[static_cast<size_t>(j % half)], static_cast<int32_t>(j), 0, j >= half && j + 1 < 2 * half);
      model.forward(b, cache, logits);
      int64_t k = 0;
      for (int64_t j = start; j < end; ++j) {
        if (!(j >= half && j + 1 < 2 * half)) continue;
        const float* row = &logits[static_cast<size_t>(k++ * n_vocab)];
        r.correct += std::max_element(row, row + n_vocab) - row == s[static_cast<size_t>((j + 1) % half)];
        ++r.predicted;
      }
    }
  }
  return r;
}

}  // namespace brisk
