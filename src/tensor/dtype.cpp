#include "tensor/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "util/error.h"

namespace brisk {

namespace {

// One entry per ggml type id; ids that ggml removed or never used have an empty name.
// Block geometry follows ggml's block_* structs (QK_K = 256).
constexpr int kTypeCount = 40;

constexpr std::array<DTypeInfo, kTypeCount> make_table() {
  std::array<DTypeInfo, kTypeCount> t{};
  auto set = [&](int id, std::string_view name, int64_t be, size_t bb, bool sup) {
    t[id] = DTypeInfo{name, be, bb, sup};
  };
  set(0, "f32", 1, 4, true);
  set(1, "f16", 1, 2, true);
  set(2, "q4_0", 32, 18, true);     // fp16 d + 16 bytes of nibbles
  set(3, "q4_1", 32, 20, false);    // fp16 d, m + 16 bytes
  set(6, "q5_0", 32, 22, false);    // fp16 d + 4 bytes qh + 16 bytes
  set(7, "q5_1", 32, 24, false);    // fp16 d, m + 4 + 16
  set(8, "q8_0", 32, 34, true);     // fp16 d + 32 int8
  set(9, "q8_1", 32, 36, false);    // fp16 d, s + 32 int8
  set(10, "q2_k", 256, 84, false);  // 16 scales + 64 qs + d + dmin
  set(11, "q3_k", 256, 110, false); // 32 hmask + 64 qs + 12 scales + d
  set(12, "q4_k", 256, 144, true);  // d + dmin + 12 scales + 128 qs
  set(13, "q5_k", 256, 176, false); // d + dmin + 12 scales + 32 qh + 128 qs
  set(14, "q6_k", 256, 210, true);  // 128 ql + 64 qh + 16 scales + d
  set(15, "q8_k", 256, 292, false); // f32 d + 256 int8 + 16 int16 bsums
  set(16, "iq2_xxs", 256, 66, false);
  set(17, "iq2_xs", 256, 74, false);
  set(18, "iq3_xxs", 256, 98, false);
  set(19, "iq1_s", 256, 50, false);
  set(20, "iq4_nl", 32, 18, false);
  set(21, "iq3_s", 256, 110, false);
  set(22, "iq2_s", 256, 82, false);
  set(23, "iq4_xs", 256, 136, false);
  set(24, "i8", 1, 1, false);
  set(25, "i16", 1, 2, false);
  set(26, "i32", 1, 4, false);
  set(27, "i64", 1, 8, false);
  set(28, "f64", 1, 8, false);
  set(29, "iq1_m", 256, 56, false);
  set(30, "bf16", 1, 2, true);
  set(34, "tq1_0", 256, 54, false);
  set(35, "tq2_0", 256, 66, false);
  set(39, "mxfp4", 32, 17, false);  // e8m0 scale + 16 bytes of fp4 nibbles
  return t;
}

constexpr std::array<DTypeInfo, kTypeCount> kTable = make_table();

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t ggml_type) {
  if (ggml_type >= kTypeCount || kTable[ggml_type].name.empty()) return std::nullopt;
  return kTable[ggml_type];
}

const DTypeInfo& info(DType t) {
  auto id = static_cast<uint32_t>(t);
  if (id >= kTypeCount || kTable[id].name.empty()) fail("unknown dtype id {}", id);
  return kTable[id];
}

std::string_view dtype_name(DType t) { return info(t).name; }

// Case-insensitive so that ggml's spelling ("Q4_K", "q4_K") is accepted too.
std::optional<DType> dtype_from_name(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (uint32_t id = 0; id < kTypeCount; ++id)
    if (!kTable[id].name.empty() && kTable[id].name == lower) return static_cast<DType>(id);
  return std::nullopt;
}

}  // namespace brisk
