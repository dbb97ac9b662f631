// GgufValue constructors and the typed GgufMetadata getters. Getters are lenient about
// width and signedness (any integer reads as int, any float as double) because writers
// disagree on them (u32 vs i32 for token ids, f32 vs f64 for epsilons).
#include <limits>

#include "format/gguf.h"
#include "util/error.h"

namespace brisk {

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8: return "u8";
    case GgufType::INT8: return "i8";
    case GgufType::UINT16: return "u16";
    case GgufType::INT16: return "i16";
    case GgufType::UINT32: return "u32";
    case GgufType::INT32: return "i32";
    case GgufType::FLOAT32: return "f32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::UINT64: return "u64";
    case GgufType::INT64: return "i64";
    case GgufType::FLOAT64: return "f64";
  }
  return "unknown";
}

GgufValue GgufValue::of_u32(uint32_t v) {
  GgufValue x;
  x.type = GgufType::UINT32;
  x.i = v;
  return x;
}
GgufValue GgufValue::of_i32(int32_t v) {
  GgufValue x;
  x.type = GgufType::INT32;
  x.i = v;
  return x;
}
GgufValue GgufValue::of_u64(uint64_t v) {
  GgufValue x;
  x.type = GgufType::UINT64;
  x.u = v;
  x.i = static_cast<int64_t>(v);  // also in `i` so that small values read naturally
  return x;
}
GgufValue GgufValue::of_f32(float v) {
  GgufValue x;
  x.type = GgufType::FLOAT32;
  x.f = v;
  return x;
}
GgufValue GgufValue::of_bool(bool v) {
  GgufValue x;
  x.type = GgufType::BOOL;
  x.i = v ? 1 : 0;
  return x;
}
GgufValue GgufValue::of_str(std::string v) {
  GgufValue x;
  x.type = GgufType::STRING;
  x.s = std::move(v);
  return x;
}
GgufValue GgufValue::of_str_array(const std::vector<std::string>& v) {
  GgufValue x;
  x.type = GgufType::ARRAY;
  x.elem = GgufType::STRING;
  x.arr.reserve(v.size());
  for (const auto& s : v) x.arr.push_back(of_str(s));
  return x;
}
GgufValue GgufValue::of_f32_array(const std::vector<float>& v) {
  GgufValue x;
  x.type = GgufType::ARRAY;
  x.elem = GgufType::FLOAT32;
  x.arr.reserve(v.size());
  for (float f : v) x.arr.push_back(of_f32(f));
  return x;
}
GgufValue GgufValue::of_i32_array(const std::vector<int32_t>& v) {
  GgufValue x;
  x.type = GgufType::ARRAY;
  x.elem = GgufType::INT32;
  x.arr.reserve(v.size());
  for (int32_t i : v) x.arr.push_back(of_i32(i));
  return x;
}

namespace {

bool is_int(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::UINT16: case GgufType::INT16:
    case GgufType::UINT32: case GgufType::INT32: case GgufType::UINT64: case GgufType::INT64:
    case GgufType::BOOL:
      return true;
    default:
      return false;
  }
}
bool is_float(GgufType t) { return t == GgufType::FLOAT32 || t == GgufType::FLOAT64; }

int64_t as_int(std::string_view key, const GgufValue& v) {
  if (!is_int(v.type))
    fail("metadata key '{}': expected an integer, found {}", key, gguf_type_name(v.type));
  if (v.type == GgufType::UINT64 && v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail("metadata key '{}': value {} does not fit in int64", key, v.u);
  return v.i;
}

double as_float(std::string_view key, const GgufValue& v) {
  if (is_float(v.type)) return v.f;
  if (v.type == GgufType::UINT64) return static_cast<double>(v.u);
  if (is_int(v.type)) return static_cast<double>(v.i);
  fail("metadata key '{}': expected a number, found {}", key, gguf_type_name(v.type));
}

const GgufValue& require(const GgufMetadata& m, std::string_view key) {
  const GgufValue* v = m.find(key);
  if (!v) fail("metadata key '{}' is missing", key);
  return *v;
}

const GgufValue& require_array(const GgufMetadata& m, std::string_view key) {
  const GgufValue& v = require(m, key);
  if (v.type != GgufType::ARRAY)
    fail("metadata key '{}': expected an array, found {}", key, gguf_type_name(v.type));
  return v;
}

}  // namespace

bool GgufMetadata::has(std::string_view key) const { return find(key) != nullptr; }

const GgufValue* GgufMetadata::find(std::string_view key) const {
  auto it = kv.find(std::string(key));
  return it == kv.end() ? nullptr : &it->second;
}

int64_t GgufMetadata::get_int(std::string_view key) const { return as_int(key, require(*this, key)); }
int64_t GgufMetadata::get_int(std::string_view key, int64_t def) const {
  const GgufValue* v = find(key);
  return v ? as_int(key, *v) : def;
}

double GgufMetadata::get_float(std::string_view key) const {
  return as_float(key, require(*this, key));
}
double GgufMetadata::get_float(std::string_view key, double def) const {
  const GgufValue* v = find(key);
  return v ? as_float(key, *v) : def;
}

bool GgufMetadata::get_bool(std::string_view key, bool def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  if (!is_int(v->type))
    fail("metadata key '{}': expected a bool, found {}", key, gguf_type_name(v->type));
  return v->i != 0 || v->u != 0;
}

std::string GgufMetadata::get_string(std::string_view key) const {
  const GgufValue& v = require(*this, key);
  if (v.type != GgufType::STRING)
    fail("metadata key '{}': expected a string, found {}", key, gguf_type_name(v.type));
  return v.s;
}
std::string GgufMetadata::get_string(std::string_view key, std::string def) const {
  return has(key) ? get_string(key) : def;
}

std::vector<std::string> GgufMetadata::get_string_array(std::string_view key) const {
  const GgufValue& v = require_array(*this, key);
  if (v.elem != GgufType::STRING)
    fail("metadata key '{}': expected an array of string, found an array of {}", key,
         gguf_type_name(v.elem));
  std::vector<std::string> out;
  out.reserve(v.arr.size());
  for (const auto& e : v.arr) out.push_back(e.s);
  return out;
}

std::vector<float> GgufMetadata::get_float_array(std::string_view key) const {
  const GgufValue& v = require_array(*this, key);
  if (!is_float(v.elem) && !is_int(v.elem))
    fail("metadata key '{}': expected an array of numbers, found an array of {}", key,
         gguf_type_name(v.elem));
  std::vector<float> out;
  out.reserve(v.arr.size());
  for (const auto& e : v.arr) out.push_back(static_cast<float>(as_float(key, e)));
  return out;
}

std::vector<int64_t> GgufMetadata::get_int_array(std::string_view key) const {
  const GgufValue& v = require_array(*this, key);
  if (!is_int(v.elem))
    fail("metadata key '{}': expected an array of integers, found an array of {}", key,
         gguf_type_name(v.elem));
  std::vector<int64_t> out;
  out.reserve(v.arr.size());
  for (const auto& e : v.arr) out.push_back(as_int(key, e));
  return out;
}

}  // namespace brisk
