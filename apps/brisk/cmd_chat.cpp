// brisk chat: an interactive conversation using the model's chat template. Each turn
// renders the whole conversation; the generator reuses the KV cache for the part that
// did not change, so only the new turn is prefilled.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"
#include "options.h"
#include "tokenizer/chat_template.h"
#include "util/error.h"
#include "util/utf8.h"

namespace brisk {
namespace {

int cmd_chat(int argc, char** argv) {
  CLI::App app{"Chat with a model (one message per line; /exit or end of input quits)"};
  ModelOptions mo;
  mo.add_to(app);
  GenerateOptions go;
  go.max_tokens = 512;
  bool seed_given = false, json = false;
  std::string system, tmpl_override;
  app.add_option("--system", system, "system message");
  app.add_option("--chat-template", tmpl_override, "chatml|llama3|llama2|mistral (default: the model's)");
  app.add_option("-n,--n-predict", go.max_tokens, "most tokens per reply");
  app.add_flag("--json", json, "one JSON object per reply instead of streamed text");
  add_sampling_options(app, go.sampling, seed_given);
  CLI11_PARSE(app, argc, argv);
  if (go.max_tokens < 1) fail("-n must be >= 1, got {}", go.max_tokens);
  if (!seed_given) go.sampling.seed = random_seed();
  go.sampling.validate();
  mo.apply_threads();

  LoadedModel lm = load_for_generation(mo.path(), mo.device_kind());
  mo.apply_kv(*lm.model);
  const Tokenizer& tok = *lm.tokenizer;
  ChatFamily family =
      detect_chat_family(tmpl_override.empty() ? tok.chat_template() : tmpl_override);
  Generator gen(*lm.model, tok, mo.context_for(lm.model->config().n_ctx_train));
  const bool tty = isatty(STDIN_FILENO);
  std::fprintf(stderr, "brisk chat: %s, template %s, context %lld. /exit to quit.\n",
               mo.path().c_str(), std::string(chat_family_name(family)).c_str(),
               (long long)gen.n_ctx());

  std::vector<ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  std::string line;
  for (;;) {
    if (tty) std::fprintf(stdout, "> "), std::fflush(stdout);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line.empty()) continue;
    try {
      require_utf8(line, "the message");
      messages.push_back({"user", line});
      std::string prompt = render_chat(family, messages);
      std::vector<int32_t> ids = tok.encode(prompt, tok.add_bos(), true);
      GenerateResult r = gen.generate(ids, go, [&](const std::string& piece) {
        if (json) return;
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      });
      if (json)
        std::fputs(nlohmann::json{{"role", "assistant"},
                                  {"content", r.text},
                                  {"tokens", r.tokens.size()},
                                  {"finish_reason", r.finish_reason},
                                  {"prompt_tokens_computed", r.timings.prompt_tokens},
                                  {"generation_tokens_per_second", r.timings.decode_tps()}}
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                       .c_str(),
                   stdout);
      std::fputc('\n', stdout);
      std::fflush(stdout);
      messages.push_back({"assistant", r.text});
    } catch (const Error& e) {
      // A bad turn (too long for the context, say) is reported; the chat goes on without it.
      std::fprintf(stderr, "error: %s\n", e.what());
      if (!messages.empty() && messages.back().role == "user") messages.pop_back();
    }
  }
  return 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("chat", "interactive chat with the model's chat template", brisk::cmd_chat);
