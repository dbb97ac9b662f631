// write_gguf -> GgufFile::open round trips, and every truncation of a written file fails
// cleanly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "format/gguf.h"
#include "util/error.h"

namespace brisk {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::getpid()) + ".gguf"))
      .string();
}

GgufValue scalar(GgufType t, int64_t i, double f = 0) {
  GgufValue v;
  v.type = t;
  v.i = i;
  v.f = f;
  if (t == GgufType::UINT64) v.u = static_cast<uint64_t>(i);
  return v;
}

GgufValue array_of(GgufType elem, std::vector<GgufValue> xs) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem = elem;
  v.arr = std::move(xs);
  return v;
}

GgufMetadata every_type() {
  GgufMetadata m;
  m.set("t.u8", scalar(GgufType::UINT8, 255));
  m.set("t.i8", scalar(GgufType::INT8, -128));
  m.set("t.u16", scalar(GgufType::UINT16, 65535));
  m.set("t.i16", scalar(GgufType::INT16, -32768));
  m.set("t.u32", GgufValue::of_u32(4000000000u));
  m.set("t.i32", GgufValue::of_i32(-2000000000));
  m.set("t.f32", GgufValue::of_f32(1.5e-5f));
  m.set("t.bool", GgufValue::of_bool(true));
  m.set("t.str", GgufValue::of_str(std::string("h\xc3\xa9llo\0x", 8)));
  m.set("t.u64", GgufValue::of_u64(18000000000000000000ull));
  m.set("t.i64", scalar(GgufType::INT64, -9000000000000000000ll));
  m.set("t.f64", scalar(GgufType::FLOAT64, 0, 3.141592653589793));
  m.set("a.str", GgufValue::of_str_array({"a", "", "<|endoftext|>"}));
  m.set("a.f32", GgufValue::of_f32_array({1.0f, -2.5f, 1e30f}));
  m.set("a.i32", GgufValue::of_i32_array({-1, 0, 7}));
  m.set("a.u8", array_of(GgufType::UINT8, {scalar(GgufType::UINT8, 1), scalar(GgufType::UINT8, 200)}));
  m.set("a.bool", array_of(GgufType::BOOL, {GgufValue::of_bool(false), GgufValue::of_bool(true)}));
  m.set("a.f64", array_of(GgufType::FLOAT64, {scalar(GgufType::FLOAT64, 0, -0.125)}));
  m.set("a.u64", array_of(GgufType::UINT64, {GgufValue::of_u64(1ull << 63)}));
  m.set("a.empty", array_of(GgufType::INT16, {}));
  m.set("a.nested", array_of(GgufType::ARRAY, {GgufValue::of_i32_array({1, 2}),
                                               GgufValue::of_str_array({"x"})}));
  m.set("general.alignment", GgufValue::of_u32(64));
  return m;
}

TEST(GgufWriter, RoundTripEveryValueType) {
  std::string p = temp_path("brisk-rt-meta");
  GgufMetadata m = every_type();
  write_gguf(p, m, {});
  auto f = GgufFile::open(p);
  std::filesystem::remove(p);
  const GgufMetadata& r = f->metadata();
  ASSERT_EQ(r.kv.size(), m.kv.size());
  EXPECT_EQ(r.get_int("t.u8"), 255);
  EXPECT_EQ(r.get_int("t.i8"), -128);
  EXPECT_EQ(r.get_int("t.u16"), 65535);
  EXPECT_EQ(r.get_int("t.i16"), -32768);
  EXPECT_EQ(r.get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(r.get_int("t.i32"), -2000000000);
  EXPECT_FLOAT_EQ(static_cast<float>(r.get_float("t.f32")), 1.5e-5f);
  EXPECT_TRUE(r.get_bool("t.bool", false));
  EXPECT_EQ(r.get_string("t.str"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(r.find("t.u64")->u, 18000000000000000000ull);
  EXPECT_EQ(r.get_int("t.i64"), -9000000000000000000ll);
  EXPECT_DOUBLE_EQ(r.get_float("t.f64"), 3.141592653589793);
  EXPECT_EQ(r.get_string_array("a.str"), (std::vector<std::string>{"a", "", "<|endoftext|>"}));
  EXPECT_EQ(r.get_float_array("a.f32"), (std::vector<float>{1.0f, -2.5f, 1e30f}));
  EXPECT_EQ(r.get_int_array("a.i32"), (std::vector<int64_t>{-1, 0, 7}));
  EXPECT_EQ(r.get_int_array("a.u8"), (std::vector<int64_t>{1, 200}));
  EXPECT_EQ(r.get_int_array("a.bool"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(r.get_float_array("a.f64"), (std::vector<float>{-0.125f}));
  EXPECT_EQ(r.find("a.u64")->arr.at(0).u, 1ull << 63);
  EXPECT_EQ(r.find("a.empty")->elem, GgufType::INT16);
  EXPECT_TRUE(r.find("a.empty")->arr.empty());
  const GgufValue& n = *r.find("a.nested");
  ASSERT_EQ(n.arr.size(), 2u);
  EXPECT_EQ(n.arr[0].elem, GgufType::INT32);
  EXPECT_EQ(n.arr[0].arr[1].i, 2);
  EXPECT_EQ(n.arr[1].arr[0].s, "x");
  EXPECT_EQ(f->alignment(), 64u);
  // every value keeps its exact type
  for (const auto& [k, v] : m.kv) {
    EXPECT_EQ(r.find(k)->type, v.type) << k;
    EXPECT_EQ(r.find(k)->elem, v.elem) << k;
  }
}

TEST(GgufWriter, GetterErrorsNameTheKey) {
  GgufMetadata m = every_type();
  auto msg = [&](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(msg([&] { m.get_int("missing.key"); }), "metadata key 'missing.key' is missing");
  EXPECT_EQ(msg([&] { m.get_int("t.str"); }), "metadata key 't.str': expected an integer, found string");
  EXPECT_EQ(msg([&] { m.get_string("t.u8"); }), "metadata key 't.u8': expected a string, found u8");
  EXPECT_EQ(msg([&] { m.get_string_array("a.i32"); }),
            "metadata key 'a.i32': expected an array of string, found an array of i32");
  EXPECT_EQ(msg([&] { m.get_int("t.u64"); }),
            "metadata key 't.u64': value 18000000000000000000 does not fit in int64");
  EXPECT_EQ(m.get_int("missing", 42), 42);
  EXPECT_EQ(m.get_float("t.u32"), 4000000000.0);
  EXPECT_EQ(m.get_string("missing", "d"), "d");
}

// Three tensors of hand-made bytes: F32, F16 and Q8_0.
struct Tensors {
  std::vector<uint8_t> f32, f16, q8;
  std::vector<TensorView> views;
  Tensors() {
    for (int k = 0; k < 24; ++k) {
      float v = 0.5f * static_cast<float>(k) - 3;
      uint8_t b[4];
      std::memcpy(b, &v, 4);
      f32.insert(f32.end(), b, b + 4);
    }
    for (int k = 0; k < 16; ++k) {  // fp16 bit patterns: 1.0 = 0x3c00, -2.0 = 0xc000
      uint16_t h = k % 2 ? 0x3c00 : 0xc000;
      f16.push_back(static_cast<uint8_t>(h & 0xff));
      f16.push_back(static_cast<uint8_t>(h >> 8));
    }
    for (int blk = 0; blk < 4; ++blk) {  // Q8_0: fp16 scale then 32 int8
      q8.push_back(0x00);
      q8.push_back(0x3c);
      for (int k = 0; k < 32; ++k) q8.push_back(static_cast<uint8_t>(k - 16 + blk));
    }
    views.push_back(view("blk.0.ffn_norm.weight", DType::F16, {16, 1}, f16.data(), 1));
    views.push_back(view("blk.0.attn_q.weight", DType::Q8_0, {64, 2}, q8.data(), 2));
    views.push_back(view("output_norm.weight", DType::F32, {8, 3}, f32.data(), 2));  // 96 bytes
  }
  static TensorView view(std::string n, DType t, std::array<int64_t, 2> ne, const void* d, int nd) {
    TensorView v;
    v.name = std::move(n);
    v.type = t;
    v.n_dims = nd;
    v.ne = {ne[0], ne[1], 1, 1};
    v.data = d;
    return v;
  }
};

TEST(GgufWriter, RoundTripTensors) {
  Tensors ts;
  GgufMetadata m;
  m.set("general.architecture", GgufValue::of_str("llama"));
  std::string p = temp_path("brisk-rt-tensors");
  write_gguf(p, m, ts.views);
  auto f = GgufFile::open(p);
  std::filesystem::remove(p);
  ASSERT_EQ(f->tensors().size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    const TensorView& w = ts.views[k];
    const TensorView& r = f->tensors()[k];  // order preserved
    EXPECT_EQ(r.name, w.name);
    EXPECT_EQ(r.type, w.type);
    EXPECT_EQ(r.n_dims, w.n_dims);
    EXPECT_EQ(r.ne, w.ne);
    ASSERT_EQ(r.nbytes(), w.nbytes());
    EXPECT_EQ(std::memcmp(r.data, w.data, w.nbytes()), 0) << w.name;
  }
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->nbytes(), 4u * 34);
  // ggml's layout: each tensor at the running offset padded to 32
  auto off = [&](const char* n) {
    return static_cast<const uint8_t*>(f->find_tensor(n)->data) - f->mapping()->data() -
           static_cast<ptrdiff_t>(f->data_offset());
  };
  EXPECT_EQ(off("blk.0.ffn_norm.weight"), 0);
  EXPECT_EQ(off("blk.0.attn_q.weight"), 32);
  EXPECT_EQ(off("output_norm.weight"), 32 + 160);
  EXPECT_EQ(f->mapping()->size(), f->data_offset() + 32 + 160 + 96);
}

// Every prefix of a valid file must be rejected with brisk::Error, never crash. The last
// tensor's size (96 bytes) is a multiple of the alignment, so no prefix is a valid file.
TEST(GgufWriter, EveryTruncationFails) {
  Tensors ts;
  GgufMetadata m = every_type();
  m.kv.erase("general.alignment");
  std::string p = temp_path("brisk-trunc");
  write_gguf(p, m, ts.views);
  std::ifstream in(p, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(p);
  ASSERT_GT(bytes.size(), 500u);
  EXPECT_NO_THROW(GgufFile::parse(bytes.data(), bytes.size()));
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_THROW(GgufFile::parse(cut.data(), cut.size(), "cut.gguf"), Error) << "length " << n;
  }
}

TEST(GgufWriter, RejectsBadTensors) {
  Tensors ts;
  std::string p = temp_path("brisk-bad");
  auto bad = ts.views;
  bad[1].ne[0] = 48;  // not a multiple of 32 for q8_0
  EXPECT_THROW(write_gguf(p, {}, bad), Error);
  bad = ts.views;
  bad.push_back(bad[0]);
  try {
    write_gguf(p, {}, bad);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate tensor name 'blk.0.ffn_norm.weight'"),
              std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(p));
  EXPECT_FALSE(std::filesystem::exists(p + ".tmp"));
}

}  // namespace
}  // namespace brisk
