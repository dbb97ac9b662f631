// One forward step's work: tokens of any number of sequences flattened into one list
// (a "ragged" batch), each with its position in its sequence, its sequence slot in the
// KV cache, and whether its logits are wanted. Prefill chunks, decode steps and mixes of
// both are all just batches.
#pragma once
#include <cstdint>
#include <vector>

namespace brisk {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pos;
  std::vector<int32_t> seq;
  std::vector<uint8_t> logits;  // 1: return this token's logits

  void add(int32_t token, int32_t position, int32_t sequence, bool want_logits) {
    tokens.push_back(token);
    pos.push_back(position);
    seq.push_back(sequence);
    logits.push_back(want_logits ? 1 : 0);
  }
  // Appends ids as positions start, start+1, ... of `sequence`; logits for the last only
  // (or for all when `all_logits`).
  void add_sequence(const std::vector<int32_t>& ids, int32_t start, int32_t sequence,
                    bool all_logits = false) {
    for (size_t i = 0; i < ids.size(); ++i)
      add(ids[i], start + static_cast<int32_t>(i), sequence, all_logits || i + 1 == ids.size());
  }
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  int64_t n_logits() const {
    int64_t n = 0;
    for (uint8_t f : logits) n += f;
    return n;
  }
  void clear() { tokens.clear(); pos.clear(); seq.clear(); logits.clear(); }
};

}  // namespace brisk
