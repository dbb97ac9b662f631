#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace brisk {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopMatcher::push(const std::string& text) {
  if (matched_) return {};
  held_ += text;
  if (stops_.empty()) return std::exchange(held_, {});
  // The earliest full match of any stop string ends the text.
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    matched_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string. Any later
  // match must start inside it (everything before was ruled out), so the rest is final.
  size_t keep = 0;
  for (const std::string& s : stops_) {
    const size_t most = std::min(held_.size(), s.size() - 1);
    for (size_t k = most; k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  if (matched_) return {};
  return std::exchange(held_, {});
}

}  // namespace brisk
