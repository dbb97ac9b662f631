// The OpenAI wire format, apart from HTTP: parses and validates /v1/completions and
// /v1/chat/completions request bodies into an engine CompletionRequest, and renders the
// engine's StreamEvents back as OpenAI responses (whole objects or SSE chunks).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "tokenizer/chat_template.h"

namespace brisk::serve {

// An error the client made (or a state the server is in), rendered as
// {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string type = "invalid_request_error",
           std::string param = "", std::string code = "")
      : std::runtime_error(message), status(status), type(std::move(type)),
        param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string type, param, code;
};

std::string error_body(int status, std::string_view message, std::string_view type,
                       std::string_view param = "", std::string_view code = "");
inline std::string error_body(const ApiError& e) {
  return error_body(e.status, e.what(), e.type, e.param, e.code);
}

enum class Endpoint { kCompletions, kChat };

// What the parser needs to know about the model being served.
struct ApiContext {
  const Tokenizer* tokenizer = nullptr;
  int64_t n_ctx = 0;
  std::string model_id;
  ChatFamily chat_family = ChatFamily::kChatML;
  bool has_draft_model = false;  // brisk serve --draft: requests may ask for "draft"
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  CompletionRequest engine;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // completions: logprobs given; chat: logprobs: true
  int top_logprobs = 0;        // alternatives per token
  bool return_tokens = false;  // extension: the generated token ids in each choice
  std::string model;           // echoed back (the served model's id when absent)
};

// Throws ApiError (400) naming the offending parameter.
ParsedRequest parse_request(Endpoint endpoint, std::string_view body, const ApiContext& ctx);

// Builds the response of one request from its engine events.
class ResponseWriter {
 public:
  ResponseWriter(const ParsedRequest& req, const Tokenizer& tok, std::string id, int64_t created);

  // Streaming: the SSE frames ("data: {...}\n\n") this event produces; the final event
  // also yields the usage chunk (when asked) and "data: [DONE]\n\n".
  std::string sse(const StreamEvent& ev);
  // Non-streaming: call add() for every event, then body() once the last one came.
  void add(const StreamEvent& ev);
  nlohmann::json body() const;

  const std::string& id() const { return id_; }
  const std::string& finish_reason() const { return finish_reason_; }
  const std::string& error() const { return error_; }

 private:
  nlohmann::json logprobs_of(const StreamEvent& ev);  // one event's tokens, OpenAI shape
  nlohmann::json chunk_base() const;
  void make_content_frame();
  nlohmann::json usage() const;
  void absorb(const StreamEvent& ev);

  const ParsedRequest& req_;
  const Tokenizer& tok_;
  std::string id_;
  int64_t created_;
  bool chat_;
  bool sent_role_ = false;
  std::string content_prefix_, content_suffix_;  // a plain content chunk's frame around its text
  std::string text_;
  std::vector<int32_t> tokens_;
  nlohmann::json logprobs_;  // accumulated (non-streaming)
  int64_t text_offset_ = 0;  // completions logprobs text_offset
  std::string finish_reason_, error_;
  int prompt_tokens_ = 0, completion_tokens_ = 0, cached_tokens_ = 0;
};

// "finish_reason" as OpenAI spells it (engine "cancelled"/"error" are not OpenAI values).
std::string openai_finish_reason(const std::string& engine_reason);

// Prometheus text exposition of the engine's metrics (plus the server's own counters).
std::string prometheus_text(const EngineMetrics& m, const std::vector<std::pair<int, uint64_t>>& http_codes);

}  // namespace brisk::serve
