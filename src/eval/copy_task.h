// Copy / induction: a random sequence of tokens S shown twice (S S); on the second copy
// the model can predict every next token only by finding it in the first copy (induction
// heads, Olsson et al. 2022). Accuracy = share of second-copy positions whose argmax is
// the true next token, teacher-forced. Cheap (one forward pass per trial) and sensitive to
// anything that loses or blurs old K/V.
#pragma once
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace brisk {

struct CopyResult {
  int64_t correct = 0, predicted = 0;
  double accuracy() const { return predicted ? static_cast<double>(correct) / predicted : 0; }
};

// trials sequences of ctx tokens: two copies of ctx / 2 tokens, either random ids from
// [first_id, n_vocab) (`text` empty) or consecutive windows of `text` (natural text, which a
// small model copies far better than random ids).
CopyResult copy_eval(Model& model, int64_t ctx, int64_t trials, int32_t first_id, uint64_t seed,
                     const std::vector<int32_t>& text = {});

}  // namespace brisk
