#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "serve/client_socket.h"
#include "serve/openai_api.h"
#include "serve/response_events.h"
#include "util/error.h"

namespace brisk::serve {

namespace {

using json = nlohmann::json;

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

bool known_path(const std::string& p) {
  return p == "/v1/completions" || p == "/v1/chat/completions" || p == "/v1/models" ||
         p == "/health" || p == "/metrics" || p.rfind("/v1/models/", 0) == 0;
}

}  // namespace

// httplib listens with a backlog of 5 (compiled into Debian's libcpp-httplib), so a burst
// of connections overflows the accept queue and clients see resets. The listening socket
// is reachable from a subclass; listen() again on it raises the backlog (Linux).
class HttpServer : public httplib::Server {
 public:
  void raise_backlog(int n) {
    socket_t fd = svr_sock_;
    if (fd != INVALID_SOCKET) ::listen(fd, n);
  }
};

struct Server::Impl {
  Engine& engine;
  ServerOptions opt;
  ApiContext ctx;
  StreamHub hub;  // before http: outlives its request threads
  HttpServer http;
  int64_t started = std::time(nullptr);
  std::atomic<bool> stopping{false};

  std::mutex active_mu;
  std::set<uint64_t> active;  // requests submitted and not finished, for stop()

  std::mutex codes_mu;
  std::map<int, uint64_t> codes;

  Impl(Engine& e, ServerOptions o) : engine(e), opt(std::move(o)) {
    ctx.tokenizer = &engine.tokenizer();
    ctx.n_ctx = engine.config().n_ctx;
    ctx.model_id = opt.model_id;
    ctx.chat_family = detect_chat_family(engine.tokenizer().chat_template());
    ctx.has_draft_model = !engine.config().speculative.draft_model.empty();
    int threads = opt.http_threads > 0
                      ? opt.http_threads
                      : std::max(64, engine.config().max_running + engine.config().max_queue + 16);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(opt.max_body_bytes);
    http.set_keep_alive_max_count(1000);
    http.set_tcp_nodelay(true);
    routes();
  }

  void track(uint64_t id, bool on) {
    std::lock_guard lk(active_mu);
    if (on) active.insert(id);
    else active.erase(id);
  }

  void routes() {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (opt.api_key.empty()) return httplib::Server::HandlerResponse::Unhandled;
      const std::string want = "Bearer " + opt.api_key;
      const std::string got = req.get_header_value("Authorization");
      // Compare in time independent of where the strings differ.
      unsigned diff = got.size() != want.size();
      for (size_t i = 0; i < want.size(); ++i) diff |= (i < got.size() ? got[i] : 0) ^ want[i];
      if (diff == 0) return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, ApiError(401, got.empty() ? "missing API key: send 'Authorization: Bearer KEY'"
                                                : "invalid API key",
                               "authentication_error", "", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    });
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;  // a handler already wrote a JSON error
      bool post = req.path == "/v1/completions" || req.path == "/v1/chat/completions";
      bool allowed = post ? req.method == "POST" : (req.method == "GET" || req.method == "HEAD");
      if ((res.status == 404 || res.status == 400) && known_path(req.path) && !allowed) {
        res.status = 405;
        res.set_header("Allow", post ? "POST" : "GET");
        res.set_content(error_body(405, "method " + req.method + " is not allowed on " + req.path,
                                   "invalid_request_error"),
                        "application/json");
      } else if (res.status == 404) {
        res.set_content(error_body(404, "unknown path " + req.path, "not_found_error", "", "unknown_url"),
                        "application/json");
      } else if (res.status == 413) {
        res.set_content(error_body(413, "the request body is larger than the limit",
                                   "invalid_request_error", "", "payload_too_large"),
                        "application/json");
      } else {
        res.set_content(error_body(res.status, "HTTP error " + std::to_string(res.status), ""),
                        "application/json");
      }
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      res.status = 500;
      res.set_content(error_body(500, what, "server_error"), "application/json");
    });
    http.set_logger([this](const httplib::Request&, const httplib::Response& res) {
      std::lock_guard lk(codes_mu);
      codes[res.status]++;
    });

    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      if (stopping) {
        res.status = 503;
        res.set_content(R"({"status":"stopping"})", "application/json");
      } else {
        res.set_content(R"({"status":"ok"})", "application/json");
      }
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::vector<std::pair<int, uint64_t>> c;
      {
        std::lock_guard lk(codes_mu);
        c.assign(codes.begin(), codes.end());
      }
      res.set_content(prometheus_text(engine.metrics(), c), "text/plain; version=0.0.4; charset=utf-8");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(json{{"object", "list"}, {"data", json::array({model_json()})}}.dump(),
                      "application/json");
    });
    http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.matches[1] != opt.model_id)
        return send_error(res, ApiError(404, "model '" + std::string(req.matches[1]) + "' does not exist",
                                        "invalid_request_error", "model", "model_not_found"));
      res.set_content(model_json().dump(), "application/json");
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      complete(Endpoint::kCompletions, req, res);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      complete(Endpoint::kChat, req, res);
    });
  }

  json model_json() const {
    const ModelConfig& mc = engine.model_config();
    return {{"id", opt.model_id}, {"object", "model"}, {"created", started}, {"owned_by", "brisk"},
            {"meta",
             {{"n_vocab", engine.tokenizer().n_vocab()}, {"n_ctx", engine.config().n_ctx},
              {"n_ctx_train", mc.n_ctx_train}, {"arch", mc.arch_name}, {"n_layer", mc.n_layer},
              {"n_embd", mc.n_embd}, {"chat_template", std::string(chat_family_name(ctx.chat_family))}}}};
  }

  void complete(Endpoint ep, const httplib::Request& req, httplib::Response& res) {
    auto pr = std::make_shared<ParsedRequest>();
    std::shared_ptr<ResponseEvents> st;
    uint64_t id = 0;
    try {
      if (stopping) throw ApiError(503, "the server is shutting down", "service_unavailable_error");
      *pr = parse_request(ep, req.body, ctx);
      st = std::make_shared<ResponseEvents>(pr->stream ? static_cast<size_t>(opt.stream_interval) : 0);
      try {
        id = engine.submit(std::move(pr->engine), [st](const StreamEvent& ev) { st->push(ev); });
      } catch (const EngineBusy& e) {
        throw ApiError(e.stopping ? 503 : 429, e.what(),
                       e.stopping ? "service_unavailable_error" : "rate_limit_error", "",
                       e.stopping ? "" : "queue_full");
      } catch (const Error& e) {
        throw ApiError(400, e.what());
      }
    } catch (const ApiError& e) {
      return send_error(res, e);
    }
    track(id, true);
    if (stopping) engine.cancel(id);  // stop() may have missed it

    auto writer = std::make_shared<ResponseWriter>(*pr, engine.tokenizer(), "", std::time(nullptr));
    if (!pr->stream) {
      // Waits for the whole answer, looking every 50 ms whether the client is still there:
      // one that hung up gets its request cancelled, so the engine frees its blocks.
      // The connection's socket is looked up once, only for answers that take that long.
      bool client_gone = false;
      int fd = -2;  // not looked up yet
      for (bool fin = false; !fin;) {
        for (const StreamEvent& ev : st->take(std::chrono::milliseconds(50))) {
          writer->add(ev);
          fin = fin || ev.done;
        }
        if (fin || client_gone) continue;
        if (fd == -2) fd = find_connection_socket(req.local_port, req.remote_port);
        if (fd >= 0 && peer_closed(fd)) {
          client_gone = true;
          engine.cancel(id);
        }
      }
      track(id, false);
      if (writer->finish_reason() == "error")
        return send_error(res, ApiError(500, "generation failed: " + writer->error(), "server_error"));
      if (writer->finish_reason() == "cancelled")
        return send_error(res, client_gone
                                   ? ApiError(499, "the client closed the connection", "client_closed_request")
                                   : ApiError(503, "the request was cancelled (server shutting down)",
                                              "service_unavailable_error"));
      res.set_content(writer->body().dump(-1, ' ', false, json::error_handler_t::replace),
                      "application/json");
      return;
    }

    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, st, pr, writer, by_hub = std::make_shared<bool>(true), lp = req.local_port,
         rp = req.remote_port](size_t, httplib::DataSink& sink) {
          if (*by_hub) {  // first call: the hub writes the stream, if it can find the socket
            *by_hub = false;
            const int fd = find_connection_socket(lp, rp);
            if (fd >= 0) {
              using R = ResponseEvents::HubResult;
              switch (st->write_through(hub, sink, fd, [writer](const StreamEvent& ev) { return writer->sse(ev); })) {
                case R::kDone: return true;
                case R::kGone: return false;
                case R::kHandedBack: {  // the client reads slowly: this thread writes the rest
                  bool ends = false;
                  if (!st->write_unsent(fd, std::chrono::seconds(CPPHTTPLIB_WRITE_TIMEOUT_SECOND), &ends)) return false;
                  if (ends) {
                    sink.done();
                    return true;
                  }
                  break;
                }
              }
            }
          }
          std::deque<StreamEvent> evs = st->take(std::chrono::milliseconds(100));
          if (evs.empty()) return true;  // nothing yet; httplib checks the socket and calls again
          std::string out;
          bool fin = false;
          for (const StreamEvent& ev : evs) {
            out += writer->sse(ev);
            fin = fin || ev.done;
          }
          // (Never write 0 bytes: httplib takes an empty write as the end of the stream.)
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;  // client gone
          if (fin) sink.done();
          return true;
        },
        [this, st, id](bool) {
          // Runs when the response is finished or abandoned: a request still generating
          // lost its client, so stop it and let the engine free its blocks.
          if (!st->finished()) engine.cancel(id);
          track(id, false);
        });
  }
};

Server::Server(Engine& engine, ServerOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {}

Server::~Server() = default;

int Server::bind(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = impl_->http.bind_to_any_port(host);
    if (bound <= 0) fail("cannot bind to {} (any port)", host);
  } else if (!impl_->http.bind_to_port(host, port)) {
    fail("cannot bind to {}:{} (in use, or not an address of this machine?)", host, port);
  }
  impl_->http.raise_backlog(SOMAXCONN);
  return bound;
}

void Server::run() { impl_->http.listen_after_bind(); }

void Server::stop() {
  impl_->stopping = true;
  std::vector<uint64_t> ids;
  {
    std::lock_guard lk(impl_->active_mu);
    ids.assign(impl_->active.begin(), impl_->active.end());
  }
  for (uint64_t id : ids) impl_->engine.cancel(id);
  impl_->http.stop();
}

}  // namespace brisk::serve
