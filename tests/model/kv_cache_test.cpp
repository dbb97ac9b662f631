#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace brisk {
namespace {

TEST(KvCache, LengthTruncateClear) {
  KvCache c({2, 3, 8, 2, 4});
  EXPECT_EQ(c.capacity(), 8);
  EXPECT_EQ(c.row_size(), 8);
  EXPECT_EQ(c.length(1), 0);
  c.set_length(1, 6);
  c.truncate(1, 9);  // longer than the sequence: nothing to drop
  EXPECT_EQ(c.length(1), 6);
  c.truncate(1, 4);
  EXPECT_EQ(c.length(1), 4);
  EXPECT_EQ(c.length(0), 0);
  c.clear(1);
  EXPECT_EQ(c.length(1), 0);
}

TEST(KvCache, RowsAreDistinctAndViewsSeeThem) {
  KvCache c({2, 2, 4, 1, 3});
  c.k_row(1, 1, 2)[1] = 5.0f;
  c.v_row(1, 1, 2)[2] = 6.0f;
  EXPECT_EQ(c.view(1, 1).k(2)[1], 5.0f);
  EXPECT_EQ(c.view(1, 1).v(2)[2], 6.0f);
  EXPECT_EQ(c.view(0, 1).k(2)[1], 0.0f);
  EXPECT_EQ(c.view(1, 0).k(2)[1], 0.0f);
  EXPECT_EQ(c.view(1, 1).k(1)[1], 0.0f);
}

TEST(KvCache, MovedCacheKeepsItsContentsAndViews) {
  KvCache a({1, 1, 4, 1, 2});
  a.k_row(0, 0, 3)[1] = 7.0f;
  a.set_length(0, 4);
  KvCache b(std::move(a));
  EXPECT_EQ(b.length(0), 4);
  EXPECT_EQ(b.view(0, 0).k(3)[1], 7.0f);
  EXPECT_EQ(b.view(0, 0).k(3), b.k_row(0, 0, 3));  // the view points into b's storage
  KvCache c({2, 2, 2, 2, 2});
  c = std::move(b);
  EXPECT_EQ(c.view(0, 0).k(3), c.k_row(0, 0, 3));
  EXPECT_EQ(c.shape().n_layer, 1);
}

TEST(KvCache, RejectsBadWrites) {
  KvCache c({1, 2, 8, 1, 2});
  EXPECT_NO_THROW(c.check_write(0, 0, 0));
  EXPECT_THROW(c.check_write(2, 0, 0), Error);  // no such slot
  EXPECT_THROW(c.check_write(0, 8, 8), Error);  // beyond capacity
  EXPECT_THROW(c.check_write(0, 3, 2), Error);  // hole at position 2
  try {
    c.check_write(1, 8, 8);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("capacity of 8"), std::string::npos) << e.what();
  }
  EXPECT_THROW(KvCache({1, 1, 0, 1, 2}), Error);
}

}  // namespace
}  // namespace brisk
