#include "util/huge_page_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

namespace brisk {
namespace {

TEST(HugePageBuffer, LargeBufferIsHugePageAlignedZeroedAndWritable) {
  const size_t n = (size_t{5} << 20) + 123;  // not a multiple of the huge page
  HugePageBuffer b(n);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(b.size(), n);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % (size_t{2} << 20), 0u);
  for (size_t i = 0; i < n; i += 4093) EXPECT_EQ(b.data()[i], 0) << i;
  b.data()[0] = 1;
  b.data()[n - 1] = 2;
  EXPECT_EQ(b.data()[0] + b.data()[n - 1], 3);
}

TEST(HugePageBuffer, SmallAndEmptyBuffers) {
  HugePageBuffer small(100);
  ASSERT_NE(small.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
  small.data()[99] = 7;
  HugePageBuffer empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
}

TEST(HugePageBuffer, MoveTransfersOwnership) {
  HugePageBuffer a(size_t{3} << 20);
  a.data()[42] = 9;
  uint8_t* p = a.data();
  HugePageBuffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[42], 9);
  HugePageBuffer c(1000);
  c = std::move(b);  // c's own mapping is released, b's taken over
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.size(), 0u);
}

}  // namespace
}  // namespace brisk
