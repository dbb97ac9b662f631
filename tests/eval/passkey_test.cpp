// passkey_eval with an answerer of its own (brisk eval --temp / --spec): an oracle that
// reads the key out of the prompt scores every trial, a wrong answer none, and each trial
// of the run gets its own index (the sampling seed brisk eval derives from it).
#include <gtest/gtest.h>

#include <set>

#include "engine/loaded_model.h"
#include "eval/passkey.h"

namespace brisk::test {
namespace {

TEST(Passkey, AnswererDecidesTheOutcomes) {
  LoadedModel lm = load_for_generation(BRISK_SOURCE_DIR "/tests/fixtures/brisk-nano");
  const Tokenizer& tok = *lm.tokenizer;
  std::vector<int64_t> trials_seen;
  const PasskeyAnswerer oracle = [&](const std::vector<int32_t>& prompt, int64_t n_new, int64_t trial) {
    EXPECT_EQ(n_new, 8);
    trials_seen.push_back(trial);
    const std::string text = tok.decode(prompt);
    const size_t a = text.find_first_of("0123456789");
    return tok.encode(" " + text.substr(a, 5) + ".", false, false);
  };
  const PasskeyResult right = passkey_eval(*lm.model, tok, {64, 96}, {0.0, 0.5, 1.0}, 3, 1, 9, oracle);
  EXPECT_EQ(right.trials, 18);
  EXPECT_EQ(right.correct, 18);
  EXPECT_EQ(trials_seen.size(), 18u);
  EXPECT_EQ(std::set<int64_t>(trials_seen.begin(), trials_seen.end()).size(), 18u);
  EXPECT_EQ(trials_seen.front(), 0);
  EXPECT_EQ(trials_seen.back(), 17);
  const PasskeyAnswerer wrong = [&](const std::vector<int32_t>&, int64_t, int64_t) {
    return tok.encode(" 00000", false, false);  // keys are 10000..99999
  };
  const PasskeyResult none = passkey_eval(*lm.model, tok, {64}, {0.5}, 4, 1, 9, wrong);
  EXPECT_EQ(none.trials, 4);
  EXPECT_EQ(none.correct, 0);
  EXPECT_EQ(none.cells[0].outcomes, "0000");
}

}  // namespace
}  // namespace brisk::test
