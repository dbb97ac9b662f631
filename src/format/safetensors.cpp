// safetensors reader. Format: https://huggingface.co/docs/safetensors (header length as
// u64 LE, UTF-8 JSON header, byte buffer; data_offsets are relative to the buffer).
#include "format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace brisk {

namespace {

// The reference implementation refuses headers above 100 MB; so do we, so that a
// corrupt length cannot make us parse (or allocate for) gigabytes of "JSON".
constexpr uint64_t kMaxHeader = 100u << 20;

struct StDtype {
  DType type;
  size_t size;
};

StDtype parse_dtype(const std::string& file, const std::string& tensor, const std::string& d) {
  if (d == "F32") return {DType::F32, 4};
  if (d == "F16") return {DType::F16, 2};
  if (d == "BF16") return {DType::BF16, 2};
  fail("{}: tensor '{}' has dtype {}, which brisk does not read (expected F32, F16 or BF16)",
       file, tensor, d);
}

uint64_t json_uint(const std::string& file, const std::string& tensor, const char* field,
                   const nlohmann::json& j) {
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<int64_t>() >= 0))
    fail("{}: tensor '{}': {} must hold non-negative integers, found {}", file, tensor, field,
         j.dump());
  return j.get<uint64_t>();
}

TensorView parse_entry(const std::string& file, const std::string& name, const nlohmann::json& e,
                       const uint8_t* data, uint64_t data_size) {
  if (!e.is_object()) fail("{}: tensor '{}': header entry is not a JSON object", file, name);
  auto dt = e.find("dtype");
  auto sh = e.find("shape");
  auto of = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string())
    fail("{}: tensor '{}': missing or non-string 'dtype'", file, name);
  if (sh == e.end() || !sh->is_array())
    fail("{}: tensor '{}': missing or non-array 'shape'", file, name);
  if (of == e.end() || !of->is_array() || of->size() != 2)
    fail("{}: tensor '{}': 'data_offsets' must be an array [begin, end]", file, name);
  StDtype d = parse_dtype(file, name, dt->get<std::string>());

  TensorView t;
  t.name = name;
  t.type = d.type;
  if (sh->size() > 4)
    fail("{}: tensor '{}' has {} dimensions, brisk handles at most 4", file, name, sh->size());
  // A 0-d tensor (a scalar) becomes a 1-element vector.
  t.n_dims = std::max<int>(1, static_cast<int>(sh->size()));
  uint64_t elems = 1;
  for (size_t k = 0; k < sh->size(); ++k) {
    uint64_t n = json_uint(file, name, "shape", (*sh)[k]);
    if (n == 0) fail("{}: tensor '{}' has an empty shape {}", file, name, sh->dump());
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(elems, n, &elems) ||
        elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("{}: tensor '{}' shape {} is too large", file, name, sh->dump());
    t.ne[sh->size() - 1 - k] = static_cast<int64_t>(n);  // PyTorch order -> GGUF order
  }
  uint64_t begin = json_uint(file, name, "data_offsets", (*of)[0]);
  uint64_t end = json_uint(file, name, "data_offsets", (*of)[1]);
  if (begin > end || end > data_size)
    fail("{}: tensor '{}' data_offsets [{}, {}] are not inside the data section ({} bytes)", file,
         name, begin, end, data_size);
  uint64_t want = 0;
  if (__builtin_mul_overflow(elems, uint64_t{d.size}, &want) || end - begin != want)
    fail("{}: tensor '{}' data_offsets [{}, {}] hold {} bytes, but shape {} of {} needs {}", file,
         name, begin, end, end - begin, sh->dump(), dt->get<std::string>(), elems * d.size);
  t.data = data + begin;
  return t;
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto map = MappedFile::open(path);
  auto f = parse(map->data(), map->size(), path);
  f->map_ = std::move(map);
  return f;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::parse(const uint8_t* bytes, size_t size,
                                                        std::string name) {
  auto f = std::make_shared<SafetensorsFile>();
  f->path_ = std::move(name);
  const std::string& nm = f->path_;
  if (size < 8)
    fail("{}: truncated safetensors file: {} bytes, the header length alone needs 8", nm, size);
  uint64_t n = 0;
  std::memcpy(&n, bytes, 8);
  if (n > size - 8 || n > kMaxHeader)
    fail("{}: safetensors header length {} at byte offset 0 exceeds the {} bytes after it{}", nm,
         n, size - 8, n > kMaxHeader ? " (or the 100 MB limit)" : "");
  f->data_offset_ = 8 + static_cast<size_t>(n);
  const uint8_t* data = bytes + f->data_offset_;
  uint64_t data_size = size - f->data_offset_;

  nlohmann::json h;
  try {
    h = nlohmann::json::parse(bytes + 8, bytes + 8 + n);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: safetensors header (bytes 8..{}) is not valid JSON: {}", nm, 8 + n, e.what());
  }
  if (!h.is_object()) fail("{}: safetensors header is not a JSON object", nm);

  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) fail("{}: '__metadata__' is not a JSON object", nm);
      for (auto m = it->begin(); m != it->end(); ++m)
        f->meta_[m.key()] = m->is_string() ? m->get<std::string>() : m->dump();
      continue;
    }
    f->tensors_.push_back(parse_entry(nm, it.key(), *it, data, data_size));
  }
  // nlohmann keeps keys sorted by name; list tensors in the order their data lies.
  std::stable_sort(f->tensors_.begin(), f->tensors_.end(),
                   [](const TensorView& a, const TensorView& b) { return a.data < b.data; });
  for (size_t k = 0; k < f->tensors_.size(); ++k) f->index_.emplace(f->tensors_[k].name, k);
  return f;
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace brisk
