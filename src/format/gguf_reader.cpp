// GGUF reader: validates the whole header (metadata and tensor infos) against the file
// size before anything else sees it, then hands out zero-copy views into the bytes.
// Layout (docs/gguf.md): magic "GGUF", u32 version, u64 tensor count, u64 kv count,
// key/values, tensor infos, padding to general.alignment, tensor data.
#include <limits>

#include "format/byte_reader.h"
#include "format/gguf.h"
#include "util/error.h"

namespace brisk {

namespace {

// Nested arrays are legal but nothing real nests deeper than 2; the cap keeps a corrupt
// file from recursing until the stack runs out.
constexpr int kMaxArrayDepth = 16;

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

// Bytes that one value of `t` takes at least: bounds array counts by the bytes left.
size_t min_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    case GgufType::STRING: return 8;  // u64 length
    case GgufType::ARRAY: return 12;  // u32 element type + u64 count
  }
  return 1;
}

class HeaderParser {
 public:
  HeaderParser(const uint8_t* bytes, size_t size, const std::string& name)
      : r_(bytes, size, name), name_(name) {}

  ByteReader& reader() { return r_; }

  std::string read_string(std::string_view what) {
    size_t at = r_.pos();
    uint64_t n = r_.read<uint64_t>(what);
    if (n > r_.remaining())
      fail("{}: {} at byte offset {} has length {}, but only {} bytes are left in the file",
           name_, what, at, n, r_.remaining());
    return std::string(r_.bytes(static_cast<size_t>(n), what));
  }

  // Reads a count and checks that `count` elements of at least `min_elem` bytes each can
  // still fit in the file: a corrupt count is caught before we reserve memory for it.
  uint64_t read_count(std::string_view what, size_t min_elem) {
    size_t at = r_.pos();
    uint64_t n = r_.read<uint64_t>(what);
    if (n > r_.remaining() / min_elem)
      fail("{}: {} at byte offset {} is {}, but the {} bytes left can hold at most {}", name_,
           what, at, n, r_.remaining(), r_.remaining() / min_elem);
    return n;
  }

  GgufType read_type(std::string_view what) {
    size_t at = r_.pos();
    uint32_t t = r_.read<uint32_t>(what);
    if (!valid_type(t))
      fail("{}: {} at byte offset {}: unknown GGUF value type {} (expected 0..12)", name_, what,
           at, t);
    return static_cast<GgufType>(t);
  }

  GgufValue read_value(GgufType t, const std::string& what, int depth) {
    GgufValue v;
    v.type = t;
    switch (t) {
      case GgufType::UINT8: v.i = r_.read<uint8_t>(what); break;
      case GgufType::INT8: v.i = r_.read<int8_t>(what); break;
      case GgufType::UINT16: v.i = r_.read<uint16_t>(what); break;
      case GgufType::INT16: v.i = r_.read<int16_t>(what); break;
      case GgufType::UINT32: v.i = r_.read<uint32_t>(what); break;
      case GgufType::INT32: v.i = r_.read<int32_t>(what); break;
      case GgufType::FLOAT32: v.f = r_.read<float>(what); break;
      case GgufType::UINT64:
        v.u = r_.read<uint64_t>(what);
        v.i = static_cast<int64_t>(v.u);
        break;
      case GgufType::INT64: v.i = r_.read<int64_t>(what); break;
      case GgufType::FLOAT64: v.f = r_.read<double>(what); break;
      case GgufType::BOOL: {
        size_t at = r_.pos();
        uint8_t b = r_.read<uint8_t>(what);
        if (b > 1)
          fail("{}: {} at byte offset {}: bool must be 0 or 1, found {}", name_, what, at, b);
        v.i = b;
        break;
      }
      case GgufType::STRING: v.s = read_string(what); break;
      case GgufType::ARRAY: {
        if (depth >= kMaxArrayDepth)
          fail("{}: {} at byte offset {}: arrays nested deeper than {}", name_, what, r_.pos(),
               kMaxArrayDepth);
        v.elem = read_type(what + " array element type");
        uint64_t n = read_count(what + " array length", min_size(v.elem));
        v.arr.reserve(static_cast<size_t>(n));
        for (uint64_t k = 0; k < n; ++k)
          v.arr.push_back(read_value(v.elem, what + "[" + std::to_string(k) + "]", depth + 1));
        break;
      }
    }
    return v;
  }

 private:
  ByteReader r_;
  const std::string& name_;
};

uint32_t read_version(ByteReader& r, const std::string& name) {
  std::string_view magic = r.bytes(4, "magic");
  if (magic != "GGUF")
    fail("{}: not a GGUF file: expected magic 'GGUF' (47 47 55 46) at byte offset 0, found "
         "{:02x} {:02x} {:02x} {:02x}",
         name, uint8_t(magic[0]), uint8_t(magic[1]), uint8_t(magic[2]), uint8_t(magic[3]));
  uint32_t v = r.read<uint32_t>("version");
  if (v == 2 || v == 3) return v;
  if (v == 1) fail("{}: GGUF version 1 is not supported (expected 2 or 3); re-convert the model", name);
  uint32_t swapped = __builtin_bswap32(v);
  if (swapped == 2 || swapped == 3)
    fail("{}: big-endian GGUF (version {} byte-swapped) is not supported", name, swapped);
  fail("{}: unsupported GGUF version {} at byte offset 4 (expected 2 or 3)", name, v);
}

size_t read_alignment(const GgufMetadata& meta, const std::string& name) {
  const GgufValue* a = meta.find("general.alignment");
  if (!a) return 32;
  switch (a->type) {
    case GgufType::UINT8: case GgufType::UINT16: case GgufType::UINT32: case GgufType::INT32:
    case GgufType::UINT64: case GgufType::INT64: break;
    default:
      fail("{}: general.alignment must be an unsigned integer, found {}", name,
           gguf_type_name(a->type));
  }
  int64_t v = a->i;
  if (v <= 0 || v > (int64_t{1} << 30) || (v & (v - 1)) != 0)
    fail("{}: general.alignment must be a nonzero power of two (at most 2^30), found {}", name, v);
  return static_cast<size_t>(v);
}

}  // namespace

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto map = MappedFile::open(path);
  auto f = parse(map->data(), map->size(), path);
  f->map_ = std::move(map);
  return f;
}

std::shared_ptr<GgufFile> GgufFile::parse(const uint8_t* bytes, size_t size, std::string name) {
  auto f = std::make_shared<GgufFile>();
  f->path_ = std::move(name);
  const std::string& nm = f->path_;
  HeaderParser p(bytes, size, nm);
  ByteReader& r = p.reader();

  f->version_ = read_version(r, nm);
  // A tensor info takes at least 8 (name length) + 4 (n_dims) + 8 (one dim) + 4 + 8 bytes,
  // a key/value at least 8 (key length) + 4 (type) + 1 (smallest value).
  uint64_t n_tensors = p.read_count("tensor count", 32);
  uint64_t n_kv = p.read_count("metadata key/value count", 13);

  for (uint64_t k = 0; k < n_kv; ++k) {
    size_t at = r.pos();
    std::string key = p.read_string("metadata key #" + std::to_string(k));
    GgufType t = p.read_type("metadata key '" + key + "' type");
    GgufValue v = p.read_value(t, "metadata key '" + key + "'", 0);
    if (f->meta_.kv.count(key))
      fail("{}: duplicate metadata key '{}' at byte offset {}", nm, key, at);
    f->meta_.kv.emplace(std::move(key), std::move(v));
  }
  f->alignment_ = read_alignment(f->meta_, nm);

  // Tensor infos first; their data is checked once the data section's start is known.
  struct Pending {
    uint64_t offset;
    size_t info_at;
  };
  std::vector<Pending> pending;
  pending.reserve(static_cast<size_t>(n_tensors));
  f->tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    size_t at = r.pos();
    TensorView t;
    t.name = p.read_string("tensor #" + std::to_string(k) + " name");
    std::string what = "tensor '" + t.name + "'";
    size_t dims_at = r.pos();
    uint32_t n_dims = r.read<uint32_t>(what + " n_dims");
    if (n_dims < 1 || n_dims > 4)
      fail("{}: {} at byte offset {}: n_dims must be 1..4, found {}", nm, what, dims_at, n_dims);
    t.n_dims = static_cast<int>(n_dims);
    int64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      size_t dim_at = r.pos();
      uint64_t ne = r.read<uint64_t>(what + " dimension");
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail("{}: {} at byte offset {}: dimension {} must be positive, found {}", nm, what,
             dim_at, d, ne);
      t.ne[d] = static_cast<int64_t>(ne);
      if (__builtin_mul_overflow(elems, t.ne[d], &elems))
        fail("{}: {} at byte offset {}: element count overflows int64 (shape {})", nm, what, at,
             t.shape_str());
    }
    size_t type_at = r.pos();
    uint32_t type_id = r.read<uint32_t>(what + " type");
    auto di = dtype_info(type_id);
    if (!di || di->block_elems <= 0 || di->block_bytes == 0)
      fail("{}: {} at byte offset {}: unknown ggml tensor type id {}", nm, what, type_at, type_id);
    t.type = static_cast<DType>(type_id);
    if (t.ne[0] % di->block_elems != 0)
      fail("{}: {}: row length {} is not a multiple of the {} block size {}", nm, what, t.ne[0],
           di->name, di->block_elems);
    uint64_t offset = r.read<uint64_t>(what + " data offset");
    if (f->index_.count(t.name))
      fail("{}: duplicate tensor name '{}' at byte offset {}", nm, t.name, at);
    f->index_.emplace(t.name, f->tensors_.size());
    f->tensors_.push_back(std::move(t));
    pending.push_back({offset, at});
  }

  size_t info_end = r.pos();
  size_t data_off = (info_end + f->alignment_ - 1) / f->alignment_ * f->alignment_;
  f->data_offset_ = data_off;
  if (!f->tensors_.empty() && data_off > size)
    fail("{}: tensor data section would start at byte offset {} (after padding to {}), past end "
         "of file (size {})",
         nm, data_off, f->alignment_, size);

  for (size_t k = 0; k < f->tensors_.size(); ++k) {
    TensorView& t = f->tensors_[k];
    uint64_t off = pending[k].offset;
    if (off % f->alignment_ != 0)
      fail("{}: tensor '{}' data offset {} is not a multiple of the alignment {}", nm, t.name, off,
           f->alignment_);
    const DTypeInfo& di = info(t.type);
    uint64_t row = 0, nbytes = 0, begin = 0, end = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(t.ne[0] / di.block_elems),
                               static_cast<uint64_t>(di.block_bytes), &row) ||
        __builtin_mul_overflow(row, static_cast<uint64_t>(t.rows()), &nbytes))
      fail("{}: tensor '{}' shape {} of {} is too large: its size in bytes overflows", nm,
           t.name, t.shape_str(), di.name);
    if (__builtin_add_overflow(static_cast<uint64_t>(data_off), off, &begin) ||
        __builtin_add_overflow(begin, nbytes, &end) || end > size)
      fail("{}: tensor '{}' data [offset {} + {}, {} bytes] runs past end of file (size {})", nm,
           t.name, data_off, off, nbytes, size);
    t.data = bytes + begin;
  }
  return f;
}

const TensorView* GgufFile::find_tensor(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace brisk
