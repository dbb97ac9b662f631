// --draft-vocab's token set (engine/draft_vocabulary.h).
#include "engine/draft_vocabulary.h"

#include <algorithm>

#include "engine_test_util.h"
#include "util/error.h"

namespace brisk::test {
namespace {

TEST(DraftVocabulary, FirstIdsWithEveryEndOfGenerationToken) {
  const Tokenizer& tok = *tiny_model().tokenizer;
  std::vector<int32_t> eog;
  for (int32_t id = 0; id < tok.n_vocab(); ++id)
    if (tok.is_eog(id)) eog.push_back(id);
  ASSERT_FALSE(eog.empty());
  for (int64_t n : {int64_t{8}, int64_t{300}, int64_t{4096}}) {
    const std::vector<int32_t> v = draft_vocabulary(tok, n);
    ASSERT_EQ(static_cast<int64_t>(v.size()), n);
    for (int32_t id : eog) EXPECT_NE(std::find(v.begin(), v.end(), id), v.end()) << "eog " << id << ", n " << n;
    std::vector<int32_t> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a repeated id, n " << n;
    // Besides the end-of-generation tokens, exactly the lowest ids.
    int32_t next = 0;
    for (int32_t id : v) {
      if (tok.is_eog(id)) continue;
      while (tok.is_eog(next)) ++next;
      EXPECT_EQ(id, next++) << "n " << n;
    }
  }
  EXPECT_TRUE(draft_vocabulary(tok, 0).empty());
  EXPECT_TRUE(draft_vocabulary(tok, tok.n_vocab()).empty());
  EXPECT_THROW(draft_vocabulary(tok, -1), Error);
}

}  // namespace
}  // namespace brisk::test
