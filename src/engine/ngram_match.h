// Exact n-gram matching of a token list's suffix against its own past: what the
// retrieval drafters (prompt lookup, RACER) build their guesses from.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>

namespace brisk {

// Whether the n tokens ending before index `end` equal the last n tokens of `t`
// (end < t.size(), so the match is an earlier occurrence with a continuation t[end]).
inline bool suffix_occurs_before(std::span<const int32_t> t, size_t end, size_t n) {
  if (end < n || end >= t.size() || n > t.size()) return false;
  return std::equal(t.end() - n, t.end(), t.begin() + (end - n));
}

}  // namespace brisk
