#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include "tensor/tensor_view.h"
#include "util/error.h"

namespace brisk {
namespace {

TEST(DType, GeometryMatchesGgml) {
  struct Row { uint32_t id; const char* name; int64_t be; size_t bb; bool sup; };
  const Row rows[] = {
      {0, "f32", 1, 4, true},       {1, "f16", 1, 2, true},       {2, "q4_0", 32, 18, true},
      {3, "q4_1", 32, 20, false},   {6, "q5_0", 32, 22, false},   {7, "q5_1", 32, 24, false},
      {8, "q8_0", 32, 34, true},    {9, "q8_1", 32, 36, false},   {10, "q2_k", 256, 84, false},
      {11, "q3_k", 256, 110, false},{12, "q4_k", 256, 144, true}, {13, "q5_k", 256, 176, false},
      {14, "q6_k", 256, 210, true}, {15, "q8_k", 256, 292, false},{16, "iq2_xxs", 256, 66, false},
      {17, "iq2_xs", 256, 74, false},{18, "iq3_xxs", 256, 98, false},{19, "iq1_s", 256, 50, false},
      {20, "iq4_nl", 32, 18, false},{21, "iq3_s", 256, 110, false},{22, "iq2_s", 256, 82, false},
      {23, "iq4_xs", 256, 136, false},{24, "i8", 1, 1, false},   {25, "i16", 1, 2, false},
      {26, "i32", 1, 4, false},     {27, "i64", 1, 8, false},     {28, "f64", 1, 8, false},
      {29, "iq1_m", 256, 56, false},{30, "bf16", 1, 2, true},     {34, "tq1_0", 256, 54, false},
      {35, "tq2_0", 256, 66, false},{39, "mxfp4", 32, 17, false},
  };
  for (const Row& r : rows) {
    auto i = dtype_info(r.id);
    ASSERT_TRUE(i.has_value()) << r.id;
    EXPECT_EQ(i->name, r.name);
    EXPECT_EQ(i->block_elems, r.be) << r.name;
    EXPECT_EQ(i->block_bytes, r.bb) << r.name;
    EXPECT_EQ(i->supported, r.sup) << r.name;
  }
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u})
    EXPECT_FALSE(dtype_info(id).has_value()) << id;
}

TEST(DType, Names) {
  EXPECT_EQ(dtype_name(DType::Q4_K), "q4_k");
  EXPECT_EQ(dtype_from_name("q8_0"), DType::Q8_0);
  EXPECT_EQ(dtype_from_name("Q6_K"), DType::Q6_K);
  EXPECT_EQ(dtype_from_name("BF16"), DType::BF16);
  EXPECT_FALSE(dtype_from_name("q4_2").has_value());
  EXPECT_FALSE(dtype_from_name("").has_value());
  EXPECT_EQ(row_bytes(DType::Q4_K, 512), 288u);
  EXPECT_EQ(row_bytes(DType::F16, 7), 14u);
  EXPECT_THROW(info(static_cast<DType>(4)), Error);
}

TEST(TensorView, ShapeStr) {
  TensorView v;
  v.n_dims = 2;
  v.ne = {384, 1024, 1, 1};
  v.type = DType::Q8_0;
  EXPECT_EQ(v.shape_str(), "[384, 1024]");
  EXPECT_EQ(v.rows(), 1024);
  EXPECT_EQ(v.row_size(), 12u * 34u);
}

}  // namespace
}  // namespace brisk
