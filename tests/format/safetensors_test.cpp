// safetensors reader: a hand-built file, shape reversal, and corruptions.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "util/error.h"

namespace brisk {
namespace {

std::vector<uint8_t> st_file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> b(8);
  uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  b.insert(b.end(), header.begin(), header.end());
  for (size_t k = 0; k < data_bytes; ++k) b.push_back(static_cast<uint8_t>(k));
  return b;
}

const char* kGood =
    R"({"__metadata__":{"format":"pt"},)"
    R"("w":{"dtype":"F16","shape":[3,4],"data_offsets":[0,24]},)"
    R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[24,30]},)"
    R"("n":{"dtype":"F32","shape":[2,1,2],"data_offsets":[32,48]}})";

std::string error_of(const std::vector<uint8_t>& b) {
  try {
    SafetensorsFile::parse(b.data(), b.size(), "m.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "parse succeeded, expected an error";
  return "";
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

TEST(Safetensors, ParsesAndReversesShapes) {
  auto b = st_file(kGood, 48);
  auto f = SafetensorsFile::parse(b.data(), b.size(), "m.safetensors");
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->tensors()[0].name, "w");  // data order
  const TensorView* w = f->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->type, DType::F16);
  EXPECT_EQ(w->n_dims, 2);
  EXPECT_EQ(w->ne[0], 4);  // PyTorch [3, 4] -> ne {4, 3}
  EXPECT_EQ(w->ne[1], 3);
  EXPECT_EQ(static_cast<const uint8_t*>(w->data), b.data() + f->data_offset());
  const TensorView* bb = f->find("b");
  EXPECT_EQ(bb->type, DType::BF16);
  EXPECT_EQ(static_cast<const uint8_t*>(bb->data)[0], 24);
  const TensorView* n = f->find("n");
  EXPECT_EQ(n->type, DType::F32);
  EXPECT_EQ(n->n_dims, 3);
  EXPECT_EQ(n->ne, (std::array<int64_t, 4>{2, 1, 2, 1}));
  EXPECT_EQ(n->nbytes(), 16u);
  EXPECT_EQ(f->find("zz"), nullptr);
}

TEST(Safetensors, EveryTruncationFails) {
  auto b = st_file(kGood, 48);
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_THROW(SafetensorsFile::parse(cut.data(), cut.size()), Error) << n;
  }
}

std::string entry(const std::string& name, const std::string& body) {
  return "{\"" + name + "\":" + body + "}";
}

TEST(Safetensors, Corruptions) {
  auto huge = st_file("{}", 0);
  huge[7] = 0x7f;  // header length ~2^63
  EXPECT_HAS(error_of(huge), "m.safetensors: safetensors header length");
  EXPECT_HAS(error_of(huge), "exceeds");
  EXPECT_HAS(error_of(st_file("{\"a\": [", 0)), "is not valid JSON");
  EXPECT_HAS(error_of(st_file("[1, 2]", 0)), "header is not a JSON object");
  auto m = error_of(st_file(
      entry("model.pos_ids", R"({"dtype":"I64","shape":[2],"data_offsets":[0,16]})"), 16));
  EXPECT_HAS(m, "tensor 'model.pos_ids' has dtype I64");
  EXPECT_HAS(m, "expected F32, F16 or BF16");
  m = error_of(st_file(entry("x.weight", R"({"dtype":"F32","shape":[4],"data_offsets":[0,16]})"), 8));
  EXPECT_HAS(m, "tensor 'x.weight' data_offsets [0, 16] are not inside the data section (8 bytes)");
  m = error_of(st_file(entry("y", R"({"dtype":"F16","shape":[4],"data_offsets":[0,6]})"), 8));
  EXPECT_HAS(m, "tensor 'y' data_offsets [0, 6] hold 6 bytes, but shape [4] of F16 needs 8");
  m = error_of(st_file(entry("z", R"({"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]})"), 4));
  EXPECT_HAS(m, "tensor 'z' has 5 dimensions");
  m = error_of(st_file(entry("e", R"({"dtype":"F32","shape":[0,3],"data_offsets":[0,0]})"), 4));
  EXPECT_HAS(m, "tensor 'e' has an empty shape [0,3]");
  m = error_of(st_file(entry("neg", R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), 4));
  EXPECT_HAS(m, "tensor 'neg': shape must hold non-negative integers, found -1");
  m = error_of(st_file(entry("o", R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})"), 8));
  EXPECT_HAS(m, "tensor 'o' data_offsets [8, 4] are not inside");
  m = error_of(st_file(entry("big", R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})"), 4));
  EXPECT_HAS(m, "tensor 'big' shape [4294967296,4294967296] is too large");
  m = error_of(st_file(entry("nod", R"({"shape":[1],"data_offsets":[0,4]})"), 4));
  EXPECT_HAS(m, "tensor 'nod': missing or non-string 'dtype'");
  m = error_of(st_file(entry("nooff", R"({"dtype":"F32","shape":[1],"data_offsets":[0]})"), 4));
  EXPECT_HAS(m, "tensor 'nooff': 'data_offsets' must be an array [begin, end]");
  m = error_of(st_file(R"({"__metadata__":[1]})", 0));
  EXPECT_HAS(m, "'__metadata__' is not a JSON object");
}

TEST(Safetensors, ScalarBecomesOneElement) {
  auto b = st_file(entry("s", R"({"dtype":"F32","shape":[],"data_offsets":[0,4]})"), 4);
  auto f = SafetensorsFile::parse(b.data(), b.size());
  EXPECT_EQ(f->find("s")->n_dims, 1);
  EXPECT_EQ(f->find("s")->elements(), 1);
}

}  // namespace
}  // namespace brisk
