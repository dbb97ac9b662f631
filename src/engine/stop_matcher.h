// Stop strings over streamed text: text that could still be the beginning of a stop string
// is held back until it is clear either way, so a client never sees part of a stop string,
// even when the string spans several tokens. At a match the text ends right before it.
#pragma once
#include <string>
#include <vector>

namespace brisk {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends `text`; returns what can be shown now. After a match: the text before it, and
  // matched() is true (later pushes return nothing).
  std::string push(const std::string& text);
  // At the end without a match: the held-back rest.
  std::string flush();
  bool matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
};

}  // namespace brisk
