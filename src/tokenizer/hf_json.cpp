// tokenizer.json (+ tokenizer_config.json) -> tokenizer.ggml.* keys, following what
// llama.cpp's convert_hf_to_gguf.py writes, so that a converted file loads the same in
// llama.cpp and brisk, and so that brisk's HF path shares the GGUF path's code.
#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace brisk {

namespace {

using json = nlohmann::json;

json parse(const std::string& text, const char* what) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("{} is not valid JSON: {}", what, e.what());
  }
}

// Added tokens that are control tokens in spirit though not marked special
// (convert_hf_to_gguf.py's does_token_look_special).
bool looks_special(const std::string& t) {
  const auto starts = [&](const char* p) { return t.rfind(p, 0) == 0; };
  const auto ends = [&](const std::string& p) {
    return t.size() >= p.size() && t.compare(t.size() - p.size(), p.size(), p) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" ||
         (starts("<|") && ends("|>")) || (starts("<｜") && ends("｜>")) ||
         (starts("<unused") && ends(">"));
}

// Collects what a pre_tokenizer node does: its Split regexes and the node types.
void walk_pre(const json& n, std::vector<std::string>& regexes, std::vector<std::string>& types) {
  if (!n.is_object()) return;
  const std::string type = n.value("type", "");
  types.push_back(type);
  if (type == "Sequence" && n.contains("pretokenizers"))
    for (const auto& c : n["pretokenizers"]) walk_pre(c, regexes, types);
  if (type == "Split" && n.contains("pattern") && n["pattern"].is_object()) {
    const auto& p = n["pattern"];
    if (p.contains("Regex")) regexes.push_back(p["Regex"].get<std::string>());
    if (p.contains("String")) regexes.push_back(p["String"].get<std::string>());
  }
  if (type == "ByteLevel" && n.value("use_regex", true)) regexes.push_back("<gpt2>");
}

// Names the llama.cpp pre-tokenizer preset a byte-level tokenizer.json describes.
std::string detect_pre(const json& pre) {
  std::vector<std::string> re, types;
  walk_pre(pre, re, types);
  const auto has_type = [&](const char* t) {
    return std::find(types.begin(), types.end(), t) != types.end();
  };
  const auto any_re = [&](const char* needle) {
    for (const auto& r : re)
      if (r.find(needle) != std::string::npos) return true;
    return false;
  };
  if (re.size() == 1 && re[0] == "<gpt2>" && !has_type("Digits") && !has_type("Punctuation"))
    return "gpt-2";
  if (any_re("(?i:'s|'t|'re|'ve|'m|'ll|'d)") && any_re("\\p{N}{1,3}")) return "llama-bpe";
  if (any_re("(?i:'s|'t|'re|'ve|'m|'ll|'d)") && any_re("\\p{N}|")) return "qwen2";
  if (any_re("\\s?\\p{L}+") && any_re("\\s?\\p{P}+")) return "deepseek-coder";
  if (has_type("Punctuation") && any_re("<gpt2>")) return "falcon";
  fail("tokenizer.json: pre_tokenizer {} matches none of the supported presets (gpt-2, "
       "llama-bpe, qwen2, deepseek-coder, falcon)",
       pre.dump().substr(0, 300));
}

std::string token_content(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return {};
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return {};
}

}  // namespace

void add_gguf_tokenizer_metadata(const std::string& tokenizer_json,
                                 const std::string& tokenizer_config_json, GgufMetadata& meta) {
  const json tj = parse(tokenizer_json, "tokenizer.json");
  const json cfg = tokenizer_config_json.empty() ? json::object()
                                                 : parse(tokenizer_config_json, "tokenizer_config.json");
  if (!tj.is_object() || !tj.contains("model") || !tj["model"].is_object())
    fail("tokenizer.json: no \"model\" object");
  const json& model = tj["model"];
  const std::string mtype = model.value("type", "");
  if (mtype != "BPE") fail("tokenizer.json: model type '{}' is not supported (only BPE)", mtype);
  if (!model.contains("vocab") || !model["vocab"].is_object())
    fail("tokenizer.json: model.vocab is missing or not an object");

  const json pre = tj.value("pre_tokenizer", json());
  const json dec = tj.value("decoder", json());
  const bool byte_level = pre.dump().find("\"ByteLevel\"") != std::string::npos ||
                          dec.dump().find("\"ByteLevel\"") != std::string::npos;
  const bool spm = !byte_level && (model.value("byte_fallback", false) ||
                                   tj.value("normalizer", json()).dump().find("▁") != std::string::npos);
  if (!byte_level && !spm)
    fail("tokenizer.json: BPE without ByteLevel or SentencePiece-style normalizer is not supported");

  // Token list by id; ids the files skip become unused [PADn] tokens, as the converter does.
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  const auto put = [&](int64_t id, const std::string& text, int32_t type) {
    if (id < 0 || id > 10'000'000) fail("tokenizer.json: token id {} for '{}' is out of range", id, text);
    if (static_cast<size_t>(id) >= tokens.size()) {
      const size_t old = tokens.size();
      tokens.resize(id + 1);
      types.resize(id + 1, 5);
      for (size_t i = old; i < tokens.size(); ++i) tokens[i] = "[PAD" + std::to_string(i) + "]";
    }
    tokens[id] = text;
    types[id] = type;
  };
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer()) fail("tokenizer.json: model.vocab['{}'] is not an integer", text);
    int32_t type = 1;
    if (spm && text.size() == 6 && text.rfind("<0x", 0) == 0 && text.back() == '>') type = 6;
    put(id.get<int64_t>(), text, type);
  }
  if (tj.contains("added_tokens") && tj["added_tokens"].is_array()) {
    for (const auto& a : tj["added_tokens"]) {
      const std::string text = a.value("content", "");
      const bool special = a.value("special", false) || looks_special(text);
      put(a.value("id", int64_t{-1}), text, special ? 3 : 4);
    }
  }
  if (tokens.empty()) fail("tokenizer.json: the vocabulary is empty");
  std::unordered_map<std::string, int64_t> index;
  for (size_t i = 0; i < tokens.size(); ++i) index[tokens[i]] = static_cast<int64_t>(i);
  const auto id_of = [&](const std::string& t) -> int64_t {
    auto it = index.find(t);
    return t.empty() || it == index.end() ? -1 : it->second;
  };

  // Merges: "a b" strings (older files) or ["a", "b"] pairs (newer ones).
  std::vector<std::string> merges;
  if (model.contains("merges") && model["merges"].is_array()) {
    for (const auto& m : model["merges"]) {
      if (m.is_string()) merges.push_back(m.get<std::string>());
      else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
        merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      else fail("tokenizer.json: a model.merges entry is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }

  if (byte_level) {
    meta.set("tokenizer.ggml.model", GgufValue::of_str("gpt2"));
    meta.set("tokenizer.ggml.pre", GgufValue::of_str(detect_pre(pre)));
    meta.set("tokenizer.ggml.merges", GgufValue::of_str_array(merges));
  } else {
    // SentencePiece scores order the merges: a token made by an earlier merge scores higher.
    std::vector<float> scores(tokens.size(), 0.0f);
    std::vector<bool> seen(tokens.size(), false);
    for (size_t r = 0; r < merges.size(); ++r) {
      const size_t sp = merges[r].find(' ', 1);
      if (sp == std::string::npos) continue;
      const int64_t id = id_of(merges[r].substr(0, sp) + merges[r].substr(sp + 1));
      if (id >= 0 && !seen[id]) { scores[id] = -static_cast<float>(r); seen[id] = true; }
    }
    meta.set("tokenizer.ggml.model", GgufValue::of_str("llama"));
    meta.set("tokenizer.ggml.pre", GgufValue::of_str("default"));
    meta.set("tokenizer.ggml.scores", GgufValue::of_f32_array(scores));
    const bool prefix = tj.value("normalizer", json()).dump().find("Prepend") != std::string::npos;
    meta.set("tokenizer.ggml.add_space_prefix", GgufValue::of_bool(prefix));
  }
  meta.set("tokenizer.ggml.tokens", GgufValue::of_str_array(tokens));
  meta.set("tokenizer.ggml.token_type", GgufValue::of_i32_array(types));

  const auto set_id = [&](const char* key, const std::string& text) {
    if (int64_t id = id_of(text); id >= 0) meta.set(key, GgufValue::of_u32(static_cast<uint32_t>(id)));
  };
  set_id("tokenizer.ggml.bos_token_id", token_content(cfg, "bos_token"));
  set_id("tokenizer.ggml.eos_token_id", token_content(cfg, "eos_token"));
  std::string unk = token_content(cfg, "unk_token");
  if (unk.empty() && model.contains("unk_token") && model["unk_token"].is_string())
    unk = model["unk_token"].get<std::string>();
  set_id("tokenizer.ggml.unknown_token_id", unk);
  set_id("tokenizer.ggml.padding_token_id", token_content(cfg, "pad_token"));
  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
    meta.set("tokenizer.ggml.add_bos_token", GgufValue::of_bool(cfg["add_bos_token"].get<bool>()));
  if (cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean())
    meta.set("tokenizer.ggml.add_eos_token", GgufValue::of_bool(cfg["add_eos_token"].get<bool>()));
  if (cfg.contains("chat_template")) {
    const auto& ct = cfg["chat_template"];
    if (ct.is_string()) {
      meta.set("tokenizer.chat_template", GgufValue::of_str(ct.get<std::string>()));
    } else if (ct.is_array()) {  // named templates: the converter keeps "default"
      for (const auto& t : ct)
        if (t.is_object() && t.value("name", "") == "default" && t.contains("template"))
          meta.set("tokenizer.chat_template", GgufValue::of_str(t["template"].get<std::string>()));
    }
  }
}

}  // namespace brisk
