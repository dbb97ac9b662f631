// `brisk inspect MODEL [--json]`: what a GGUF file or Hugging Face folder holds, as brisk
// reads it: metadata (long arrays summarized), the tensor table and totals.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "format/gguf.h"
#include "format/model_source.h"

namespace brisk {
namespace {

using json = nlohmann::json;

// A string for one line of text output: control characters escaped, long ones cut.
std::string short_str(const std::string& s, size_t max) {
  std::string out = "\"";
  for (size_t k = 0; k < s.size() && k < max; ++k) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '"' || c == '\\') out += std::string("\\") + static_cast<char>(c);
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  out += "\"";
  if (s.size() > max) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

std::string scalar_text(const GgufValue& v) {
  switch (v.type) {
    case GgufType::STRING: return short_str(v.s, 60);
    case GgufType::BOOL: return v.i ? "true" : "false";
    case GgufType::FLOAT32: case GgufType::FLOAT64: return fmt::format("{:g}", v.f);
    case GgufType::UINT64: return std::to_string(v.u);
    case GgufType::ARRAY: return fmt::format("[{} x {}]", gguf_type_name(v.elem), v.arr.size());
    default: return std::to_string(v.i);
  }
}

std::string value_text(const GgufValue& v, size_t first) {
  if (v.type != GgufType::ARRAY) return scalar_text(v);
  std::string out = "[";
  for (size_t k = 0; k < v.arr.size() && k < first; ++k)
    out += (k ? ", " : "") + (v.arr[k].type == GgufType::STRING ? short_str(v.arr[k].s, 24)
                                                                 : scalar_text(v.arr[k]));
  if (v.arr.size() > first) out += ", ...";
  return out + "]";
}

json value_json(const GgufValue& v, size_t first) {
  switch (v.type) {
    case GgufType::STRING: return v.s;
    case GgufType::BOOL: return v.i != 0;
    case GgufType::FLOAT32: case GgufType::FLOAT64: return v.f;
    case GgufType::UINT64: return v.u;
    case GgufType::ARRAY: {
      json items = json::array();
      for (size_t k = 0; k < v.arr.size() && k < first; ++k) items.push_back(value_json(v.arr[k], first));
      if (v.arr.size() <= first) return items;
      return json{{"array_of", gguf_type_name(v.elem)}, {"length", v.arr.size()}, {"first", items}};
    }
    default: return v.i;
  }
}

std::string type_text(const GgufValue& v) {
  if (v.type != GgufType::ARRAY) return std::string(gguf_type_name(v.type));
  return fmt::format("[{} x {}]", gguf_type_name(v.elem), v.arr.size());
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return u ? fmt::format("{:.2f} {}", b, units[u]) : fmt::format("{:.0f} B", b);
}

int cmd_inspect(int argc, char** argv) {
  CLI::App app{"Show the metadata and tensors of a GGUF file or Hugging Face folder"};
  std::string path = default_model_path();
  bool as_json = false;
  size_t first = 8;
  app.add_option("model", path, "a .gguf file or a Hugging Face folder (default: bundled model)");
  app.add_flag("--json", as_json, "print one JSON object instead of text");
  app.add_option("--array-items", first, "array elements shown before summarizing (default 8)");
  CLI11_PARSE(app, argc, argv);

  // A GGUF file is opened directly too, for its header facts and tensor offsets.
  std::shared_ptr<GgufFile> gguf;
  ModelSource src;
  if (std::filesystem::is_directory(path)) {
    src = load_model_source(path);
  } else {
    gguf = GgufFile::open(path);
    src.meta = gguf->metadata();
    src.tensors = gguf->tensors();
  }

  auto offset_of = [&](const TensorView& t) -> int64_t {
    if (!gguf) return -1;
    return static_cast<const uint8_t*>(t.data) - gguf->mapping()->data() -
           static_cast<int64_t>(gguf->data_offset());
  };
  uint64_t params = 0, bytes = 0;
  std::map<std::string, std::pair<size_t, uint64_t>> by_type;  // count, bytes
  for (const auto& t : src.tensors) {
    params += static_cast<uint64_t>(t.elements());
    bytes += t.nbytes();
    auto& bt = by_type[std::string(dtype_name(t.type))];
    bt.first++;
    bt.second += t.nbytes();
  }

  if (as_json) {
    json j;
    j["path"] = path;
    j["format"] = gguf ? "gguf" : "huggingface";
    if (gguf) {
      j["version"] = gguf->version();
      j["alignment"] = gguf->alignment();
      j["data_offset"] = gguf->data_offset();
    }
    j["hf_layout"] = src.hf_layout;
    json meta = json::object();
    for (const auto& [k, v] : src.meta.kv) meta[k] = {{"type", type_text(v)}, {"value", value_json(v, first)}};
    j["metadata"] = meta;
    json ts = json::array();
    for (const auto& t : src.tensors) {
      json shape = json::array();
      for (int d = 0; d < t.n_dims; ++d) shape.push_back(t.ne[d]);
      json e = {{"name", t.name}, {"type", dtype_name(t.type)}, {"shape", shape}, {"bytes", t.nbytes()}};
      if (gguf) e["offset"] = offset_of(t);
      ts.push_back(e);
    }
    j["tensors"] = ts;
    json bt = json::object();
    for (const auto& [n, cb] : by_type) bt[n] = {{"tensors", cb.first}, {"bytes", cb.second}};
    j["totals"] = {{"tensors", src.tensors.size()}, {"parameters", params}, {"bytes", bytes}, {"by_type", bt}};
    if (!src.tokenizer_json.empty()) j["tokenizer_json_bytes"] = src.tokenizer_json.size();
    std::printf("%s\n", j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return 0;
  }

  if (gguf)
    std::printf("%s: GGUF v%u, alignment %zu, tensor data at byte %zu\n", path.c_str(), gguf->version(),
                gguf->alignment(), gguf->data_offset());
  else
    std::printf("%s: Hugging Face folder (translated to GGUF names; rotate-half RoPE layout)%s\n",
                path.c_str(), src.tokenizer_json.empty() ? "" : ", tokenizer.json present");
  std::printf("\nmetadata (%zu keys):\n", src.meta.kv.size());
  size_t kw = 0;
  for (const auto& [k, v] : src.meta.kv) kw = std::max(kw, k.size());
  for (const auto& [k, v] : src.meta.kv)
    std::printf("  %-*s  %-16s %s\n", static_cast<int>(kw), k.c_str(), type_text(v).c_str(),
                value_text(v, first).c_str());

  size_t nw = 4;
  for (const auto& t : src.tensors) nw = std::max(nw, t.name.size());
  std::printf("\ntensors (%zu):\n  %-*s  %-7s %-22s %12s %12s\n", src.tensors.size(), static_cast<int>(nw),
              "name", "type", "shape", "offset", "bytes");
  for (const auto& t : src.tensors) {
    std::string off = gguf ? std::to_string(offset_of(t)) : "-";
    std::printf("  %-*s  %-7s %-22s %12s %12zu\n", static_cast<int>(nw), t.name.c_str(),
                std::string(dtype_name(t.type)).c_str(), t.shape_str().c_str(), off.c_str(), t.nbytes());
  }
  std::printf("\ntotals: %zu tensors, %llu parameters (%.2fM), %s\n", src.tensors.size(),
              static_cast<unsigned long long>(params), static_cast<double>(params) / 1e6,
              human_bytes(static_cast<double>(bytes)).c_str());
  for (const auto& [n, cb] : by_type)
    std::printf("  %-6s %4zu tensors  %s\n", n.c_str(), cb.first, human_bytes(static_cast<double>(cb.second)).c_str());
  return 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("inspect", "show a model's metadata and tensors (GGUF file or HF folder)", brisk::cmd_inspect);
