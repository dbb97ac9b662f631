// GGUF reader: hand-made valid and corrupt headers; every error must name the problem.
#include <gtest/gtest.h>

#include "format/gguf.h"
#include "gguf_bytes.h"
#include "util/error.h"

namespace brisk {
namespace {

using test::Bytes;

// Parses and returns the error message; fails the test if parsing succeeds.
std::string parse_error(const Bytes& x) {
  try {
    GgufFile::parse(x.b.data(), x.b.size(), "t.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "parse succeeded, expected an error";
  return "";
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

TEST(GgufReader, MinimalValidFile) {
  Bytes x;
  x.header(1, 2).kv_u32("general.alignment", 32);
  x.str("general.architecture").u32(8).str("llama");
  x.tensor("w", {8, 2}, 0, 0).pad(32);
  size_t data_at = x.b.size();
  for (int k = 0; k < 16; ++k) x.put<float>(static_cast<float>(k));
  auto f = GgufFile::parse(x.b.data(), x.b.size(), "t.gguf");
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset(), data_at);
  EXPECT_EQ(f->metadata().get_string("general.architecture"), "llama");
  ASSERT_EQ(f->tensors().size(), 1u);
  const TensorView* w = f->find_tensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->n_dims, 2);
  EXPECT_EQ(w->ne[0], 8);
  EXPECT_EQ(w->ne[1], 2);
  EXPECT_EQ(w->data, x.b.data() + data_at);  // zero copy
  EXPECT_EQ(static_cast<const float*>(w->data)[9], 9.0f);
  EXPECT_EQ(f->find_tensor("nope"), nullptr);
}

TEST(GgufReader, Version2Accepted) {
  Bytes x;
  x.header(0, 1, 2).kv_u32("a", 7);
  auto f = GgufFile::parse(x.b.data(), x.b.size(), "t.gguf");
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->metadata().get_int("a"), 7);
}

TEST(GgufReader, WrongMagic) {
  Bytes x;
  x.raw("GGML").u32(3).u64(0).u64(0);
  auto m = parse_error(x);
  EXPECT_HAS(m, "t.gguf");
  EXPECT_HAS(m, "magic");
  EXPECT_HAS(m, "47 47 4d 4c");
}

TEST(GgufReader, Version1And4Rejected) {
  Bytes v1, v4, be;
  v1.header(0, 0, 1);
  v4.header(0, 0, 4);
  be.header(0, 0, 0x03000000);
  EXPECT_HAS(parse_error(v1), "GGUF version 1 is not supported");
  EXPECT_HAS(parse_error(v4), "unsupported GGUF version 4");
  EXPECT_HAS(parse_error(be), "big-endian");
}

TEST(GgufReader, EmptyAndTinyInputs) {
  Bytes x;
  EXPECT_HAS(parse_error(x), "truncated");
  x.raw("GG");
  EXPECT_HAS(parse_error(x), "truncated");
}

TEST(GgufReader, UnknownValueType) {
  Bytes x;
  x.header(0, 1).str("my.key").u32(13).u32(0);
  auto m = parse_error(x);
  EXPECT_HAS(m, "unknown GGUF value type 13");
  EXPECT_HAS(m, "my.key");
}

TEST(GgufReader, UnknownArrayElementType) {
  Bytes x;
  x.header(0, 1).str("arr.key").u32(9).u32(77).u64(1);
  auto m = parse_error(x);
  EXPECT_HAS(m, "unknown GGUF value type 77");
  EXPECT_HAS(m, "arr.key");
}

TEST(GgufReader, UnknownGgmlType) {
  Bytes x;
  x.header(1, 0).tensor("blk.0.attn_q.weight", {32}, 99, 0).pad(32).zeros(128);
  auto m = parse_error(x);
  EXPECT_HAS(m, "blk.0.attn_q.weight");
  EXPECT_HAS(m, "unknown ggml tensor type id 99");
  Bytes removed;  // id 4 was Q4_2, removed from ggml
  removed.header(1, 0).tensor("t", {32}, 4, 0).pad(32).zeros(128);
  EXPECT_HAS(parse_error(removed), "type id 4");
}

TEST(GgufReader, AbsurdCounts) {
  Bytes kv;
  kv.header(0, uint64_t{1} << 60);
  EXPECT_HAS(parse_error(kv), "metadata key/value count");
  Bytes tn;
  tn.header(uint64_t{1} << 62, 0);
  EXPECT_HAS(parse_error(tn), "tensor count");
  Bytes arr;
  arr.header(0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(uint64_t{1} << 61);
  auto m = parse_error(arr);
  EXPECT_HAS(m, "tokenizer.ggml.tokens");
  EXPECT_HAS(m, "array length");
  Bytes s;
  s.header(0, 1).str("k").u32(8).u64(~uint64_t{0});
  m = parse_error(s);
  EXPECT_HAS(m, "metadata key 'k'");
  EXPECT_HAS(m, "has length 18446744073709551615");
  Bytes key;
  key.header(0, 1).u64(1000).raw("abc").zeros(16);
  EXPECT_HAS(parse_error(key), "metadata key #0");
}

TEST(GgufReader, DuplicateKeyAndTensor) {
  Bytes k;
  k.header(0, 2).kv_u32("general.x", 1).kv_u32("general.x", 2);
  EXPECT_HAS(parse_error(k), "duplicate metadata key 'general.x'");
  Bytes t;
  t.header(2, 0).tensor("a.weight", {8}, 0, 0).tensor("a.weight", {8}, 0, 32).pad(32).zeros(64);
  EXPECT_HAS(parse_error(t), "duplicate tensor name 'a.weight'");
}

TEST(GgufReader, TensorOffsetPastEnd) {
  Bytes x;
  x.header(1, 0).tensor("blk.3.attn_q.weight", {8, 4}, 0, 64).pad(32).zeros(128);
  auto m = parse_error(x);
  EXPECT_HAS(m, "tensor 'blk.3.attn_q.weight' data");
  EXPECT_HAS(m, "128 bytes] runs past end of file");
  Bytes huge;
  huge.header(1, 0).tensor("w", {8}, 0, ~uint64_t{0} - 31).pad(32).zeros(64);
  EXPECT_HAS(parse_error(huge), "runs past end of file");
}

TEST(GgufReader, MisalignedOffset) {
  Bytes x;
  x.header(1, 0).tensor("w", {8}, 0, 4).pad(32).zeros(64);
  auto m = parse_error(x);
  EXPECT_HAS(m, "tensor 'w' data offset 4 is not a multiple of the alignment 32");
}

TEST(GgufReader, BadShapes) {
  Bytes d0, d5, zero, ovf, block;
  d0.header(1, 0).tensor("a", {}, 0, 0).pad(32).zeros(32);
  EXPECT_HAS(parse_error(d0), "tensor 'a' at byte offset 33: n_dims must be 1..4, found 0");
  d5.header(1, 0).tensor("b", {1, 1, 1, 1, 1}, 0, 0).pad(32).zeros(32);
  EXPECT_HAS(parse_error(d5), "n_dims must be 1..4, found 5");
  zero.header(1, 0).tensor("c", {8, 0}, 0, 0).pad(32).zeros(32);
  EXPECT_HAS(parse_error(zero), "tensor 'c'");
  EXPECT_HAS(parse_error(zero), "dimension 1 must be positive, found 0");
  ovf.header(1, 0).tensor("d", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0).pad(32).zeros(32);
  EXPECT_HAS(parse_error(ovf), "tensor 'd' at byte offset 24: element count overflows");
  block.header(1, 0).tensor("e", {33}, 8, 0).pad(32).zeros(64);  // q8_0 blocks hold 32
  EXPECT_HAS(parse_error(block), "tensor 'e': row length 33 is not a multiple of the q8_0 block size 32");
  Bytes big;  // fits int64 elements but not bytes
  big.header(1, 0).tensor("f", {uint64_t{1} << 62}, 0, 0).pad(32).zeros(32);
  EXPECT_HAS(parse_error(big), "tensor 'f' shape [4611686018427387904] of f32 is too large");
}

TEST(GgufReader, BadAlignment) {
  for (uint32_t a : {0u, 3u, 48u}) {
    Bytes x;
    x.header(0, 1).kv_u32("general.alignment", a);
    auto m = parse_error(x);
    EXPECT_HAS(m, "general.alignment must be a nonzero power of two");
    EXPECT_HAS(m, std::to_string(a));
  }
  Bytes s;
  s.header(0, 1).str("general.alignment").u32(8).str("32");
  EXPECT_HAS(parse_error(s), "general.alignment must be an unsigned integer, found string");
}

TEST(GgufReader, CustomAlignmentPlacesData) {
  Bytes x;
  x.header(1, 1).kv_u32("general.alignment", 64).tensor("w", {16}, 0, 0).pad(64);
  size_t at = x.b.size();
  x.zeros(64);
  auto f = GgufFile::parse(x.b.data(), x.b.size(), "t.gguf");
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset(), at);
}

TEST(GgufReader, BadBoolAndDeepNesting) {
  Bytes b;
  b.header(0, 1).str("flag").u32(7).put<uint8_t>(2);
  EXPECT_HAS(parse_error(b), "metadata key 'flag' at byte offset 40: bool must be 0 or 1, found 2");
  Bytes n;
  n.header(0, 1).str("deep").u32(9);
  for (int k = 0; k < 40; ++k) n.u32(9).u64(1);
  n.u32(4).u64(1).u32(5);
  auto m = parse_error(n);
  EXPECT_HAS(m, "deep");
  EXPECT_HAS(m, "nested deeper than");
}

TEST(GgufReader, NestedArrays) {
  Bytes x;
  // [[1, 2], [3]] as arrays of u16
  x.header(0, 1).str("nest").u32(9).u32(9).u64(2);
  x.u32(2).u64(2).put<uint16_t>(1).put<uint16_t>(2);
  x.u32(2).u64(1).put<uint16_t>(3);
  auto f = GgufFile::parse(x.b.data(), x.b.size(), "t.gguf");
  const GgufValue* v = f->metadata().find("nest");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->elem, GgufType::ARRAY);
  ASSERT_EQ(v->arr.size(), 2u);
  EXPECT_EQ(v->arr[0].elem, GgufType::UINT16);
  ASSERT_EQ(v->arr[0].arr.size(), 2u);
  EXPECT_EQ(v->arr[0].arr[1].i, 2);
  EXPECT_EQ(v->arr[1].arr[0].i, 3);
}

TEST(GgufReader, DataSectionPastEnd) {
  Bytes x;
  x.header(1, 0).tensor("w", {8}, 0, 0);  // no padding, no data
  auto m = parse_error(x);
  EXPECT_HAS(m, "past end of file");
}

}  // namespace
}  // namespace brisk
