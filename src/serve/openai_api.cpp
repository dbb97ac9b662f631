#include "serve/openai_api.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <random>

#include "util/error.h"
#include "util/utf8.h"

namespace brisk::serve {

using json = nlohmann::json;

namespace {

const char* status_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

[[noreturn]] void bad(const std::string& param, const std::string& msg, const std::string& code = "") {
  throw ApiError(400, msg, "invalid_request_error", param, code);
}

const char* type_name(const json& v) {
  if (v.is_number_integer()) return "integer";
  return v.type_name();
}

// Optional field accessors: absent or null -> false, wrong type -> 400 naming the field.
bool get_number(const json& o, const char* key, double lo, double hi, double& out) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return false;
  if (!it->is_number()) bad(key, fmt::format("'{}' must be a number, got {}", key, type_name(*it)));
  double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi)
    bad(key, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, v));
  out = v;
  return true;
}

bool get_int(const json& o, const char* key, int64_t lo, int64_t hi, int64_t& out) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return false;
  if (!it->is_number_integer()) {
    if (it->is_number_float() && std::floor(it->get<double>()) == it->get<double>() &&
        std::fabs(it->get<double>()) < 9e15) {
      out = static_cast<int64_t>(it->get<double>());
    } else {
      bad(key, fmt::format("'{}' must be an integer, got {}", key, type_name(*it)));
    }
  } else if (it->is_number_unsigned()) {
    uint64_t u = it->get<uint64_t>();
    out = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
              ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(u);
  } else {
    out = it->get<int64_t>();
  }
  if (out < lo || out > hi) bad(key, fmt::format("'{}' must be between {} and {}, got {}", key, lo, hi, out));
  return true;
}

bool get_bool(const json& o, const char* key, bool& out) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return false;
  if (!it->is_boolean()) bad(key, fmt::format("'{}' must be a boolean, got {}", key, type_name(*it)));
  out = it->get<bool>();
  return true;
}

std::vector<int32_t> token_ids(const json& arr, const ApiContext& ctx, const char* param) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  int64_t n_vocab = ctx.tokenizer->n_vocab();
  for (const json& v : arr) {
    if (!v.is_number_integer())
      bad(param, fmt::format("'{}' must be a string or an array of token ids", param));
    int64_t id = v.get<int64_t>();
    if (id < 0 || id >= n_vocab)
      bad(param, fmt::format("token id {} is out of range [0, {})", id, n_vocab));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

std::vector<int32_t> parse_prompt(const json& o, const ApiContext& ctx) {
  auto it = o.find("prompt");
  if (it == o.end() || it->is_null()) bad("prompt", "'prompt' is required");
  const json* p = &*it;
  if (p->is_array() && p->size() == 1 && (p->at(0).is_string() || p->at(0).is_array()))
    p = &p->at(0);  // a batch of one prompt
  const Tokenizer& tok = *ctx.tokenizer;
  if (p->is_string()) {
    const std::string& s = p->get_ref<const std::string&>();
    if (s.empty()) bad("prompt", "'prompt' is empty");
    return tok.encode(s, tok.add_bos(), true);
  }
  if (p->is_array()) {
    if (p->empty()) bad("prompt", "'prompt' is empty");
    if (p->at(0).is_string() || p->at(0).is_array())
      bad("prompt", "only one prompt per request is supported");
    return token_ids(*p, ctx, "prompt");
  }
  bad("prompt", fmt::format("'prompt' must be a string or an array of token ids, got {}", type_name(*p)));
}

std::string message_content(const json& m, size_t i) {
  auto it = m.find("content");
  std::string param = fmt::format("messages[{}].content", i);
  if (it == m.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {  // content parts: only text parts can be rendered
    std::string s;
    for (const json& part : *it) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
          !part["text"].is_string())
        bad(param, "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
      s += part["text"].get<std::string>();
    }
    return s;
  }
  bad(param, fmt::format("'{}' must be a string or an array of content parts, got {}", param, type_name(*it)));
}

std::vector<int32_t> parse_messages(const json& o, const ApiContext& ctx) {
  auto it = o.find("messages");
  if (it == o.end() || it->is_null()) bad("messages", "'messages' is required");
  if (!it->is_array()) bad("messages", fmt::format("'messages' must be an array, got {}", type_name(*it)));
  if (it->empty()) bad("messages", "'messages' is empty");
  std::vector<ChatMessage> msgs;
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    if (!m.is_object()) bad(fmt::format("messages[{}]", i), fmt::format("messages[{}] must be an object", i));
    auto r = m.find("role");
    if (r == m.end() || !r->is_string())
      bad(fmt::format("messages[{}].role", i), fmt::format("messages[{}].role must be a string", i));
    std::string role = r->get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    msgs.push_back({role, message_content(m, i)});
  }
  std::string text;
  try {
    text = render_chat(ctx.chat_family, msgs, true);
  } catch (const Error& e) {
    bad("messages", e.what());
  }
  const Tokenizer& tok = *ctx.tokenizer;
  return tok.encode(text, tok.add_bos(), true);
}

// "logit_bias": {"token id": bias, ...} as OpenAI spells it (ids as strings, biases in
// [-100, 100]).
std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& o, int64_t n_vocab) {
  std::vector<std::pair<int32_t, float>> out;
  auto it = o.find("logit_bias");
  if (it == o.end() || it->is_null()) return out;
  if (!it->is_object())
    bad("logit_bias", fmt::format("'logit_bias' must be an object of token ids to biases, got {}", type_name(*it)));
  for (const auto& [key, val] : it->items()) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id >= n_vocab)
      bad("logit_bias", fmt::format("'logit_bias' key '{}' is not a token id of this model (0..{})", key, n_vocab - 1));
    if (!val.is_number())
      bad("logit_bias", fmt::format("'logit_bias' of token {} must be a number, got {}", id, type_name(val)));
    const double b = val.get<double>();
    if (!std::isfinite(b) || b < -100 || b > 100)
      bad("logit_bias", fmt::format("'logit_bias' of token {} must be between -100 and 100, got {}", id, b));
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  return out;
}

std::vector<std::string> parse_stop(const json& o) {
  std::vector<std::string> stop;
  auto it = o.find("stop");
  if (it == o.end() || it->is_null()) return stop;
  if (it->is_string()) {
    if (!it->get_ref<const std::string&>().empty()) stop.push_back(it->get<std::string>());
    return stop;
  }
  if (!it->is_array()) bad("stop", fmt::format("'stop' must be a string or an array of strings, got {}", type_name(*it)));
  if (it->size() > 4) bad("stop", fmt::format("'stop' holds at most 4 strings, got {}", it->size()));
  for (const json& s : *it) {
    if (!s.is_string()) bad("stop", "'stop' must be a string or an array of strings");
    if (!s.get_ref<const std::string&>().empty()) stop.push_back(s.get<std::string>());
  }
  return stop;
}

std::string random_hex(int n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < n; ++i) s += digits[rng() & 15];
  return s;
}

}  // namespace

std::string error_body(int status, std::string_view message, std::string_view type,
                       std::string_view param, std::string_view code) {
  json e = {{"message", message}, {"type", type.empty() ? status_type(status) : type},
            {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return dump(json{{"error", e}});
}

ParsedRequest parse_request(Endpoint endpoint, std::string_view body, const ApiContext& ctx) {
  if (utf8_valid_prefix(body) != body.size())
    bad("", fmt::format("the request body is not valid UTF-8 (byte offset {})", utf8_valid_prefix(body)));
  json o;
  try {
    o = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past a double (1e999)
    bad("", fmt::format("malformed JSON in the request body: {}", e.what()));
  }
  if (!o.is_object()) bad("", fmt::format("the request body must be a JSON object, got {}", type_name(o)));

  ParsedRequest r;
  r.endpoint = endpoint;
  r.model = ctx.model_id;
  if (auto it = o.find("model"); it != o.end() && !it->is_null()) {
    if (!it->is_string()) bad("model", "'model' must be a string");
    r.model = it->get<std::string>();
  }
  CompletionRequest& q = r.engine;
  q.prompt = endpoint == Endpoint::kChat ? parse_messages(o, ctx) : parse_prompt(o, ctx);
  if (q.prompt.empty()) bad(endpoint == Endpoint::kChat ? "messages" : "prompt", "the prompt has no tokens");
  int64_t n_prompt = static_cast<int64_t>(q.prompt.size());
  if (n_prompt + 1 > ctx.n_ctx)
    bad(endpoint == Endpoint::kChat ? "messages" : "prompt",
        fmt::format("the prompt has {} tokens; the context holds {} (prompt and at least one "
                    "generated token)", n_prompt, ctx.n_ctx),
        "context_length_exceeded");

  int64_t v = 0;
  const char* max_key = o.contains("max_completion_tokens") && !o["max_completion_tokens"].is_null()
                            ? "max_completion_tokens" : "max_tokens";
  int64_t room = ctx.n_ctx - n_prompt;
  if (get_int(o, max_key, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), v)) {
    if (v <= 0) bad(max_key, fmt::format("'{}' must be at least 1, got {}", max_key, v));
    if (v > ctx.n_ctx)
      bad(max_key, fmt::format("'{}' is {}, more than the context size {}", max_key, v, ctx.n_ctx),
          "context_length_exceeded");
    q.max_tokens = static_cast<int>(std::min(v, room));  // the context bounds it anyway
  } else {
    q.max_tokens = static_cast<int>(endpoint == Endpoint::kChat ? room : std::min<int64_t>(16, room));
  }

  // OpenAI's defaults: temperature 1, top_p 1, no top-k / min-p filtering.
  SamplingParams& s = q.sampling;
  s.temperature = 1.0f;
  s.top_p = 1.0f;
  s.top_k = 0;
  s.min_p = 0.0f;
  double d = 0;
  if (get_number(o, "temperature", 0, 2, d)) s.temperature = static_cast<float>(d);
  if (get_number(o, "top_p", 0, 1, d)) s.top_p = static_cast<float>(d);
  if (get_number(o, "min_p", 0, 1, d)) s.min_p = static_cast<float>(d);
  if (get_number(o, "presence_penalty", -2, 2, d)) s.presence_penalty = static_cast<float>(d);
  if (get_number(o, "frequency_penalty", -2, 2, d)) s.frequency_penalty = static_cast<float>(d);
  if (get_number(o, "repeat_penalty", 0, 10, d)) s.repeat_penalty = static_cast<float>(d);
  if (get_int(o, "top_k", 0, 1 << 30, v)) s.top_k = static_cast<int>(v);
  s.logit_bias = parse_logit_bias(o, ctx.tokenizer->n_vocab());
  if (get_int(o, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), v))
    s.seed = static_cast<uint64_t>(v);
  else
    s.seed = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
  try {
    s.validate();
  } catch (const Error& e) {
    bad("", e.what());
  }

  q.stop = parse_stop(o);
  get_bool(o, "ignore_eos", q.ignore_eos);
  get_bool(o, "return_tokens", r.return_tokens);
  get_bool(o, "stream", r.stream);
  if (auto it = o.find("stream_options"); it != o.end() && !it->is_null()) {
    if (!it->is_object()) bad("stream_options", "'stream_options' must be an object");
    get_bool(*it, "include_usage", r.include_usage);
  }
  if (get_int(o, "n", 1, 1, v) && v != 1) bad("n", "only n = 1 is supported");
  bool echo = false;
  if (get_bool(o, "echo", echo) && echo) bad("echo", "'echo' is not supported");

  if (endpoint == Endpoint::kCompletions) {
    if (get_int(o, "logprobs", 0, 20, v)) {
      r.logprobs = true;
      r.top_logprobs = static_cast<int>(v);
    }
  } else {
    get_bool(o, "logprobs", r.logprobs);
    if (get_int(o, "top_logprobs", 0, 20, v)) {
      if (!r.logprobs) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
      r.top_logprobs = static_cast<int>(v);
    }
  }
  q.top_logprobs = r.logprobs ? r.top_logprobs : -1;

  // Extension: per-request speculative decoding, {"method": "lookup" | "racer" | "draft" |
  // "smc" | "none", "k": 1..64, "particles": 1..64 (smc)}; absent: the server's --spec
  // default. "draft" and "smc" use the server's --draft model; smc needs temperature > 0.
  if (auto it = o.find("speculative"); it != o.end() && !it->is_null()) {
    if (!it->is_object())
      bad("speculative", fmt::format("'speculative' must be an object like {{\"method\": \"lookup\", "
                                     "\"k\": 4}}, got {}", type_name(*it)));
    SpecOptions sp;
    auto m = it->find("method");
    if (m == it->end() || !m->is_string()) bad("speculative", "'speculative.method' must be a string");
    sp.method = m->get<std::string>();
    if (sp.method != "none" && sp.method != "lookup" && sp.method != "racer" && sp.method != "draft" &&
        sp.method != "smc")
      bad("speculative", fmt::format("'speculative.method' must be none, lookup, racer, draft or smc, got '{}'", sp.method));
    if ((sp.method == "draft" || sp.method == "smc") && !ctx.has_draft_model)
      bad("speculative", fmt::format("'speculative.method' {} needs a server started with --draft MODEL", sp.method));
    if (sp.method == "smc" && !(q.sampling.temperature > 0))
      bad("speculative", "'speculative.method' smc reweights sampled particles: it needs 'temperature' > 0");
    if (sp.method == "smc" && q.top_logprobs >= 0)
      bad("speculative", "'speculative.method' smc does not give logprobs");
    if (get_int(*it, "k", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), v)) {
      if (v < 1 || v > 64) bad("speculative", fmt::format("'speculative.k' must be in [1, 64], got {}", v));
      sp.k = static_cast<int>(v);
    }
    if (get_int(*it, "particles", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), v)) {
      if (sp.method != "smc") bad("speculative", "'speculative.particles' is only used with method smc");
      if (v < 1 || v > 64) bad("speculative", fmt::format("'speculative.particles' must be in [1, 64], got {}", v));
      sp.particles = static_cast<int>(v);
    }
    q.speculative = sp;
  }
  return r;
}

std::string openai_finish_reason(const std::string& e) {
  if (e == "length") return "length";
  return "stop";
}

// ---- responses ----

ResponseWriter::ResponseWriter(const ParsedRequest& req, const Tokenizer& tok, std::string id,
                               int64_t created)
    : req_(req), tok_(tok), id_(std::move(id)), created_(created),
      chat_(req.endpoint == Endpoint::kChat) {
  if (id_.empty()) id_ = (chat_ ? "chatcmpl-" : "cmpl-") + random_hex(24);
  if (chat_) logprobs_ = {{"content", json::array()}, {"refusal", nullptr}};
  else logprobs_ = {{"tokens", json::array()}, {"token_logprobs", json::array()},
                    {"top_logprobs", json::array()}, {"text_offset", json::array()}};
  if (req_.stream) make_content_frame();
}

json ResponseWriter::logprobs_of(const StreamEvent& ev) {
  size_t n = std::min(ev.tokens.size(), ev.logprobs.size());
  auto bytes = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(c);
    return b;
  };
  if (chat_) {
    json content = json::array();
    for (size_t i = 0; i < n; ++i) {
      std::string piece = tok_.token_to_piece(ev.tokens[i]);
      json top = json::array();
      if (i < ev.top_logprobs.size())
        for (const TokenLogprob& t : ev.top_logprobs[i]) {
          if (static_cast<int>(top.size()) >= req_.top_logprobs) break;
          std::string p = tok_.token_to_piece(t.id);
          top.push_back({{"token", p}, {"logprob", t.logprob}, {"bytes", bytes(p)}});
        }
      content.push_back({{"token", piece}, {"logprob", ev.logprobs[i]}, {"bytes", bytes(piece)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json toks = json::array(), lps = json::array(), tops = json::array(), offs = json::array();
  for (size_t i = 0; i < n; ++i) {
    std::string piece = tok_.token_to_piece(ev.tokens[i]);
    toks.push_back(piece);
    lps.push_back(ev.logprobs[i]);
    json top = json::object();
    if (i < ev.top_logprobs.size())
      for (const TokenLogprob& t : ev.top_logprobs[i]) {
        if (static_cast<int>(top.size()) >= req_.top_logprobs) break;
        std::string p = tok_.token_to_piece(t.id);
        if (!top.contains(p)) top[p] = t.logprob;
      }
    tops.push_back(top);
    offs.push_back(text_offset_);
    text_offset_ += static_cast<int64_t>(piece.size());
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offs}};
}

json ResponseWriter::usage() const {
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion_tokens_},
          {"total_tokens", prompt_tokens_ + completion_tokens_},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
}

// A plain content chunk differs from the stream's others only in its text: the rest is
// dumped once (around a placeholder) and each chunk splices its text in, which gives the
// bytes dump() of the whole object would (2.0 -> 0.17 µs a chunk). The keys come out
// sorted, "choices" first, so the placeholder found is the text's even if the model's name
// holds the same string.
void ResponseWriter::make_content_frame() {
  const std::string mark = "brisk-chunk-text";
  json ch = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (chat_) ch["delta"] = {{"content", mark}};
  else ch["text"] = mark;
  json c = chunk_base();
  c["choices"] = json::array({ch});
  const std::string whole = dump(c), quoted = '"' + mark + '"';
  const size_t at = whole.find(quoted);
  content_prefix_ = whole.substr(0, at);
  content_suffix_ = whole.substr(at + quoted.size());
}

json ResponseWriter::chunk_base() const {
  json c = {{"id", id_}, {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
            {"created", created_}, {"model", req_.model}, {"system_fingerprint", nullptr}};
  if (req_.include_usage) c["usage"] = nullptr;
  return c;
}

void ResponseWriter::absorb(const StreamEvent& ev) {
  text_ += ev.text;
  tokens_.insert(tokens_.end(), ev.tokens.begin(), ev.tokens.end());
  if (ev.done) {
    finish_reason_ = ev.finish_reason;
    error_ = ev.error;
    prompt_tokens_ = ev.prompt_tokens;
    completion_tokens_ = ev.completion_tokens;
    cached_tokens_ = ev.cached_prompt_tokens;
  }
}

std::string ResponseWriter::sse(const StreamEvent& ev) {
  absorb(ev);
  std::string out;
  auto frame = [&](const json& j) { out += "data: " + dump(j) + "\n\n"; };
  bool has_content = !ev.text.empty() || (req_.logprobs && !ev.tokens.empty()) ||
                     (req_.return_tokens && !ev.tokens.empty());
  if (chat_ && !sent_role_) {
    json c = chunk_base();
    c["choices"] = json::array({{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                                 {"logprobs", nullptr}, {"finish_reason", nullptr}}});
    frame(c);
    sent_role_ = true;
  }
  if (has_content && !req_.logprobs && !req_.return_tokens) {
    out += "data: " + content_prefix_ + dump(json(ev.text)) + content_suffix_ + "\n\n";
  } else if (has_content) {
    json ch = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (chat_) ch["delta"] = {{"content", ev.text}};
    else ch["text"] = ev.text;
    if (req_.logprobs) ch["logprobs"] = logprobs_of(ev);
    if (req_.return_tokens) ch["tokens"] = ev.tokens;
    json c = chunk_base();
    c["choices"] = json::array({ch});
    frame(c);
  }
  if (!ev.done) return out;
  if (ev.finish_reason == "error" || ev.finish_reason == "cancelled") {
    bool err = ev.finish_reason == "error";
    frame(json::parse(error_body(err ? 500 : 503,
                                 err ? "generation failed: " + ev.error : "the request was cancelled",
                                 err ? "server_error" : "service_unavailable_error")));
  } else {
    json ch = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", openai_finish_reason(ev.finish_reason)}};
    if (chat_) ch["delta"] = json::object();
    else ch["text"] = "";
    json c = chunk_base();
    c["choices"] = json::array({ch});
    frame(c);
    if (req_.include_usage) {
      json u = chunk_base();
      u["choices"] = json::array();
      u["usage"] = usage();
      frame(u);
    }
  }
  out += "data: [DONE]\n\n";
  return out;
}

void ResponseWriter::add(const StreamEvent& ev) {
  absorb(ev);
  if (!req_.logprobs || ev.tokens.empty()) return;
  json lp = logprobs_of(ev);
  if (chat_) {
    for (auto& c : lp["content"]) logprobs_["content"].push_back(std::move(c));
  } else {
    for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
      for (auto& x : lp[k]) logprobs_[k].push_back(std::move(x));
  }
}

json ResponseWriter::body() const {
  json ch = {{"index", 0}, {"finish_reason", openai_finish_reason(finish_reason_)},
             {"logprobs", req_.logprobs ? logprobs_ : json(nullptr)}};
  if (chat_) ch["message"] = {{"role", "assistant"}, {"content", text_}, {"refusal", nullptr}};
  else ch["text"] = text_;
  if (req_.return_tokens) ch["tokens"] = tokens_;
  return {{"id", id_}, {"object", chat_ ? "chat.completion" : "text_completion"},
          {"created", created_}, {"model", req_.model}, {"system_fingerprint", nullptr},
          {"choices", json::array({ch})}, {"usage", usage()}};
}

// ---- metrics ----

std::string prometheus_text(const EngineMetrics& m, const std::vector<std::pair<int, uint64_t>>& http_codes) {
  std::string o;
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    o += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  metric("brisk_requests_total", "counter", "Requests accepted by the engine.", m.requests_total);
  metric("brisk_requests_finished_total", "counter", "Requests that finished (stop or length).", m.requests_finished);
  metric("brisk_requests_cancelled_total", "counter", "Requests cancelled (client gone or shutdown).", m.requests_cancelled);
  metric("brisk_requests_rejected_total", "counter", "Requests refused (queue full or stopping).", m.requests_rejected);
  metric("brisk_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", m.prompt_tokens_total);
  metric("brisk_generated_tokens_total", "counter", "Tokens generated.", m.generated_tokens_total);
  metric("brisk_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.", m.prefix_cache_queries);
  metric("brisk_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.", m.prefix_cache_hits);
  metric("brisk_prefix_cache_hit_rate", "gauge", "Prefix-cache hits / queries (prompt tokens).",
         m.prefix_cache_queries ? static_cast<double>(m.prefix_cache_hits) / m.prefix_cache_queries : 0.0);
  metric("brisk_preemptions_total", "counter", "Sequences preempted (blocks freed, recomputed later).", m.preemptions_total);
  metric("brisk_spec_drafted_tokens_total", "counter", "Speculative guesses verified.", m.spec_drafted_total);
  metric("brisk_spec_accepted_tokens_total", "counter", "Speculative guesses accepted.", m.spec_accepted_total);
  metric("brisk_spec_drafted_beside_tokens_total", "counter",
         "Speculative guesses drafted beside a target pass (--spec-overlap).", m.spec_drafted_beside_total);
  metric("brisk_queue_depth", "gauge", "Requests waiting to start.", m.queue_depth);
  metric("brisk_running_sequences", "gauge", "Sequences being prefilled or decoded.", m.running);
  metric("brisk_kv_blocks_total", "gauge", "KV blocks in the pool.", m.kv_blocks_total);
  metric("brisk_kv_blocks_used", "gauge", "KV blocks held by sequences.", m.kv_blocks_used);
  metric("brisk_kv_blocks_free", "gauge", "KV blocks not held by any sequence.", m.kv_blocks_total - m.kv_blocks_used);
  metric("brisk_kv_blocks_cached", "gauge", "Free KV blocks that still hold a reusable prefix.", m.kv_blocks_cached);
  auto histogram = [&](const char* name, const char* help, const std::vector<uint64_t>& counts,
                       double sum, uint64_t count) {
    o += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
    for (size_t i = 0; i < m.latency_buckets.size() && i < counts.size(); ++i)
      o += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, m.latency_buckets[i], counts[i]);
    o += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count, name, sum, name, count);
  };
  histogram("brisk_time_to_first_token_seconds", "Time from arrival to the first generated token.",
            m.ttft_counts, m.ttft_sum, m.ttft_count);
  histogram("brisk_inter_token_latency_seconds", "Time between consecutive tokens of a sequence.",
            m.itl_counts, m.itl_sum, m.itl_count);
  o += "# HELP brisk_http_responses_total HTTP responses by status code.\n"
       "# TYPE brisk_http_responses_total counter\n";
  for (auto& [code, n] : http_codes) o += fmt::format("brisk_http_responses_total{{code=\"{}\"}} {}\n", code, n);
  return o;
}

}  // namespace brisk::serve
