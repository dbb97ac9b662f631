// load_model_source: a GGUF file as it is, or a Hugging Face folder translated to GGUF
// keys and tensor names with the safetensors data still mapped in place.
#include "format/model_source.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "format/hf_config.h"
#include "format/safetensors.h"
#include "util/error.h"

namespace brisk {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("cannot read '{}'", p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json read_json(const fs::path& p) {
  try {
    return json::parse(read_text(p));
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", p.string(), e.what());
  }
}

// The safetensors files of a folder: model.safetensors, or the shards named by
// model.safetensors.index.json (each shard once, in first-mention order).
std::vector<fs::path> weight_files(const fs::path& dir, json* weight_map) {
  if (fs::exists(dir / "model.safetensors")) return {dir / "model.safetensors"};
  fs::path idx = dir / "model.safetensors.index.json";
  if (!fs::exists(idx))
    fail("{}: no model.safetensors or model.safetensors.index.json", dir.string());
  json j = read_json(idx);
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object() || wm->empty())
    fail("{}: 'weight_map' must be a non-empty object", idx.string());
  std::vector<fs::path> files;
  std::set<std::string> seen;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string())
      fail("{}: weight_map entry '{}' is not a file name", idx.string(), it.key());
    std::string f = it->get<std::string>();
    if (f.find('/') != std::string::npos || f == "..")
      fail("{}: weight_map entry '{}' names '{}', outside the folder", idx.string(), it.key(), f);
    if (seen.insert(f).second) files.push_back(dir / f);
  }
  *weight_map = *wm;
  return files;
}

ModelSource load_hf(const fs::path& dir) {
  ModelSource src;
  src.path = dir.string();
  src.hf_layout = true;

  fs::path cfg_path = dir / "config.json";
  if (!fs::exists(cfg_path)) fail("{}: not a model folder (no config.json)", dir.string());
  json gen = fs::exists(dir / "generation_config.json") ? read_json(dir / "generation_config.json")
                                                        : json();
  HfConfig cfg = translate_hf_config(read_json(cfg_path), gen, cfg_path.string());
  src.meta = std::move(cfg.meta);
  fs::path norm = fs::absolute(dir).lexically_normal();
  if (norm.filename().empty()) norm = norm.parent_path();  // "folder/" -> "folder"
  src.meta.set("general.name", GgufValue::of_str(norm.filename().string()));

  json weight_map;
  std::set<std::string> names;
  for (const fs::path& file : weight_files(dir, &weight_map)) {
    auto st = SafetensorsFile::open(file.string());
    src.keep_alive.push_back(st);
    for (const TensorView& t : st->tensors()) {
      // A shard may carry tensors the index assigns elsewhere; the index decides.
      if (weight_map.is_object()) {
        auto w = weight_map.find(t.name);
        if (w == weight_map.end() || w->get<std::string>() != file.filename().string()) continue;
      }
      auto gg = hf_tensor_to_gguf(t.name);
      if (!gg) continue;  // not a weight brisk uses
      if (!names.insert(*gg).second)
        fail("{}: tensor '{}' maps to '{}', which another tensor already provides", file.string(),
             t.name, *gg);
      TensorView v = t;
      v.name = *gg;
      src.tensors.push_back(std::move(v));
    }
  }
  if (weight_map.is_object())
    for (auto it = weight_map.begin(); it != weight_map.end(); ++it) {
      auto gg = hf_tensor_to_gguf(it.key());
      if (gg && !names.count(*gg))
        fail("{}: tensor '{}' listed in model.safetensors.index.json is not in '{}'",
             dir.string(), it.key(), it->get<std::string>());
    }

  if (!cfg.rope_freqs.empty()) {
    // The divisors live as long as the views: owned through keep_alive.
    auto freqs = std::make_shared<std::vector<float>>(std::move(cfg.rope_freqs));
    TensorView v;
    v.name = "rope_freqs.weight";
    v.type = DType::F32;
    v.n_dims = 1;
    v.ne = {static_cast<int64_t>(freqs->size()), 1, 1, 1};
    v.data = freqs->data();
    src.tensors.push_back(v);
    src.keep_alive.push_back(freqs);
  }

  if (fs::exists(dir / "tokenizer.json")) src.tokenizer_json = read_text(dir / "tokenizer.json");
  if (fs::exists(dir / "tokenizer_config.json"))
    src.tokenizer_config_json = read_text(dir / "tokenizer_config.json");
  return src;
}

ModelSource load_gguf(const std::string& path) {
  auto f = GgufFile::open(path);
  ModelSource src;
  src.path = path;
  src.meta = f->metadata();
  src.tensors = f->tensors();
  src.hf_layout = false;
  src.keep_alive.push_back(f);
  return src;
}

}  // namespace

const TensorView* ModelSource::find(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

ModelSource load_model_source(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return load_hf(fs::path(path));
  if (!fs::exists(path, ec)) fail("'{}': no such file or folder", path);
  return load_gguf(path);
}

}  // namespace brisk
