// libFuzzer target: any request body to /v1/completions or /v1/chat/completions must parse
// into a request the engine can run, or throw ApiError (the server's 4xx JSON error); any
// other exception escapes and is reported as a crash. A parsed request must fit the context:
// a non-empty prompt of ids in the vocabulary, room for 1..max_tokens generated tokens.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_fixtures.h"
#include "serve/openai_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto tokenizer = fuzz::nano_tokenizer();
  static const brisk::serve::ApiContext ctx = [] {
    brisk::serve::ApiContext c;
    c.tokenizer = tokenizer.get();
    c.n_ctx = 64;  // small, so that long prompts and max_tokens meet the limits
    c.model_id = "brisk-nano";
    return c;
  }();
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (auto endpoint : {brisk::serve::Endpoint::kCompletions, brisk::serve::Endpoint::kChat}) {
    try {
      const brisk::serve::ParsedRequest r = brisk::serve::parse_request(endpoint, body, ctx);
      const auto& q = r.engine;
      const int64_t n = static_cast<int64_t>(q.prompt.size());
      if (n == 0 || n + 1 > ctx.n_ctx) __builtin_trap();
      if (q.max_tokens < 1 || q.max_tokens > ctx.n_ctx - n) __builtin_trap();
      for (int32_t id : q.prompt)
        if (id < 0 || id >= tokenizer->n_vocab()) __builtin_trap();
      if (!(q.sampling.temperature >= 0.f) || !(q.sampling.top_p >= 0.f && q.sampling.top_p <= 1.f)) __builtin_trap();
    } catch (const brisk::serve::ApiError& e) {
      if (e.status < 400 || e.status >= 500) __builtin_trap();  // the client's error
      (void)brisk::serve::error_body(e);                       // renders (valid UTF-8 JSON)
    }
  }
  return 0;
}
