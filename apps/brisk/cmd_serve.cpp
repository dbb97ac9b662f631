// brisk serve: the OpenAI-compatible HTTP server (src/serve) over the batching engine.
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "command.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "options.h"
#include "serve/server.h"
#include "util/error.h"

namespace brisk {
namespace {

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  unsigned char c = static_cast<unsigned char>(sig);
  ssize_t r = write(g_signal_pipe[1], &c, 1);
  (void)r;
}

int cmd_serve(int argc, char** argv) {
  CLI::App app{"Serve a model over an OpenAI-compatible HTTP API"};
  ModelOptions mo;
  mo.add_to(app);
  std::string host = "127.0.0.1", model_id, api_key;
  int port = 8080;
  EngineConfig ec;
  ec.max_queue = 128;
  serve::ServerOptions so;
  size_t max_body_mb = 8;
  app.add_option("--host", host, "address to listen on (default 127.0.0.1: this machine only)");
  app.add_option("--port", port, "port (default 8080; 0 picks a free one)");
  app.add_option("--parallel", ec.max_running, "sequences decoding at once (default 8)");
  app.add_option("--queue", ec.max_queue, "waiting requests before answering 429 (default 128)");
  app.add_option("--kv-blocks", ec.kv_blocks, "KV blocks in the pool (default: parallel * ctx / block size)");
  CLI::Option* block_size =
      app.add_option("--block-size", ec.block_size, "positions per KV block (default 16; 32 with --kv-type kivi4)");
  app.add_option("--token-budget", ec.token_budget, "tokens per engine step: decodes + prefill chunk (default 512)");
  app.add_option("--prefix-cache", ec.prefix_cache, "prefix-cache policy: off, lru, ... (default lru)");
  app.add_option("--api-key", api_key, "require 'Authorization: Bearer KEY' on every request");
  app.add_option("--model-id", model_id, "model name in /v1/models and responses (default: file name)");
  app.add_option("--max-body-mb", max_body_mb, "largest request body in MiB (default 8)");
  app.add_option("--http-threads", so.http_threads, "HTTP worker threads (default: parallel + queue + 16)");
  app.add_option("--stream-interval", so.stream_interval,
                 "streamed tokens written to a client at a time, after the first (default 1; more cost "
                 "fewer wake-ups and system calls per token, and arrive in bursts, held at most 0.1 s)");
  app.add_option("--spec", ec.speculative.method,
                 "default speculative decoding of requests that do not set 'speculative': none, lookup, racer "
                 "or draft");
  app.add_option("--draft", ec.speculative.draft_model,
                 "draft model (same tokenizer) for requests asking for 'draft' or 'smc' (SMC-SD, sampled "
                 "requests only, one at a time) speculation");
  app.add_option("--spec-k", ec.speculative.k, "most tokens drafted per step (default 4)");
  app.add_option("--draft-vocab", ec.speculative.draft_vocab, kDraftVocabHelp);
  app.add_flag("--spec-overlap", ec.spec_overlap,
               "MineDraft overlap: draft-model requests in two groups, one drafted on its own thread while "
               "the target verifies the other (give the target one thread fewer with -t)");
  CLI11_PARSE(app, argc, argv);

  if (port < 0 || port > 65535) fail("--port must be in 0..65535, got {}", port);
  if (ec.max_running < 1) fail("--parallel must be >= 1, got {}", ec.max_running);
  if (ec.max_queue < 0) fail("--queue must be >= 0, got {}", ec.max_queue);
  if (ec.kv_blocks < 0) fail("--kv-blocks must be >= 0, got {}", ec.kv_blocks);
  if (block_size->count() == 0 && mo.kv_type == "kivi4") ec.block_size = kKiviGroup;  // its K groups
  if (max_body_mb < 1) fail("--max-body-mb must be >= 1");
  if (so.stream_interval < 1 || so.stream_interval > 1024)
    fail("--stream-interval must be in 1..1024, got {}", so.stream_interval);
  so.api_key = api_key;
  so.max_body_bytes = max_body_mb << 20;
  mo.apply_threads();

  // SIGINT/SIGTERM: the handler (any thread may run it) writes the signal number to a
  // pipe; a watcher thread reads it and stops the server cleanly. SIGPIPE is ignored: a
  // write to a client that went away must fail, not kill the server.
  if (pipe(g_signal_pipe) != 0) fail("pipe() failed");
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESETHAND;  // a second Ctrl-C kills at once
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::string path = mo.path();
  LoadedModel lm = load_for_generation(path, mo.device_kind());
  mo.apply_kv(*lm.model);
  ec.n_ctx = mo.context_for(lm.model->config().n_ctx_train);
  so.model_id = !model_id.empty() ? model_id : std::filesystem::path(path).filename().string();
  if (std::filesystem::is_directory(path)) so.model_id = std::filesystem::path(path).lexically_normal().parent_path().filename().string();
  if (so.model_id.empty()) so.model_id = "brisk";

  Engine engine(lm, ec);
  serve::Server server(engine, so);
  int bound = server.bind(host, port);

  std::thread sig_thread([&] {
    unsigned char sig = 0;
    while (read(g_signal_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (sig != 0)
      std::fprintf(stderr, "brisk serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    server.stop();
  });
  std::printf("brisk serve: listening on http://%s:%d (model %s, ctx %lld, parallel %d)\n",
              host.c_str(), bound, so.model_id.c_str(), static_cast<long long>(engine.config().n_ctx),
              ec.max_running);
  std::fflush(stdout);
  server.run();
  // run() also returns when listening fails; wake the signal thread either way.
  server.stop();
  unsigned char zero = 0;
  if (write(g_signal_pipe[1], &zero, 1) < 0) {
  }
  sig_thread.join();
  std::fprintf(stderr, "brisk serve: stopped\n");
  return 0;
}

}  // namespace
}  // namespace brisk

BRISK_COMMAND("serve", "serve a model over an OpenAI-compatible HTTP API", brisk::cmd_serve);
