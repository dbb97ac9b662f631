#include "engine/stop_matcher.h"

#include <gtest/gtest.h>

namespace brisk {
namespace {

// Feeds pieces; returns everything shown, and whether a stop string matched.
std::pair<std::string, bool> feed(std::vector<std::string> stops, std::vector<std::string> pieces) {
  StopMatcher m(std::move(stops));
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  if (!m.matched()) out += m.flush();
  return {out, m.matched()};
}

TEST(StopMatcher, NoStopsPassesThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, HoldsBackAPossibleStart) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.push("hello E"), "hello ");
  EXPECT_EQ(m.push("N"), "");
  EXPECT_EQ(m.push("x"), "ENx");  // not a stop after all
  EXPECT_EQ(m.push("EN"), "");
  EXPECT_EQ(m.push("D and more"), "");
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.push("later"), "");
}

TEST(StopMatcher, MatchAcrossPiecesCutsExactly) {
  EXPECT_EQ(feed({"\n\n"}, {"one\n", "\ntwo"}), std::make_pair(std::string("one"), true));
  EXPECT_EQ(feed({"stop"}, {"a s", "t", "o", "p b"}), std::make_pair(std::string("a "), true));
  EXPECT_EQ(feed({"xyz", "b"}, {"aaab"}), std::make_pair(std::string("aaa"), true));
  // The earliest match wins, whichever stop string it is.
  EXPECT_EQ(feed({"cd", "bcdx"}, {"ab", "cdef"}), std::make_pair(std::string("ab"), true));
  EXPECT_EQ(feed({"cd", "abcdef"}, {"ab", "cdef"}), std::make_pair(std::string(""), true));
  // Overlapping prefixes: "aab" inside "aaab".
  EXPECT_EQ(feed({"aab"}, {"a", "a", "a", "b"}), std::make_pair(std::string("a"), true));
  // Held back to the end without a match: flushed.
  EXPECT_EQ(feed({"stop"}, {"a st"}), std::make_pair(std::string("a st"), false));
  // Multi-byte UTF-8 stop string.
  EXPECT_EQ(feed({"é!"}, {"caf\xc3\xa9", "!"}), std::make_pair(std::string("caf"), true));
}

}  // namespace
}  // namespace brisk
