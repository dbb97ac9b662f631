// The HTTP front of the engine: an OpenAI-compatible API over cpp-httplib.
// HTTP worker threads parse and validate a request, submit it to the Engine, and wait on
// a per-request queue that the engine thread's callback fills (serve/response_events.h);
// one thread writes the streaming responses' SSE chunks from those queues. A client that
// goes away mid-stream (a failed write) cancels its request, so its KV blocks return to
// the pool.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "engine/engine.h"

namespace brisk::serve {

struct ServerOptions {
  std::string model_id = "brisk";   // what /v1/models lists and responses echo
  std::string api_key;              // non-empty: every request needs "Authorization: Bearer KEY"
  size_t max_body_bytes = 8u << 20;  // larger bodies get 413
  int http_threads = 0;             // 0: enough for every running and queued request
  int stream_interval = 1;          // streamed tokens written together (after the first); >= 1
};

class Server {
 public:
  Server(Engine& engine, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; port 0 picks a free one. Returns the bound port; throws
  // brisk::Error when the address cannot be bound.
  int bind(const std::string& host, int port);
  // Serves until stop(); returns then.
  void run();
  // Thread-safe: new requests get 503, running ones are cancelled, run() returns.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brisk::serve
