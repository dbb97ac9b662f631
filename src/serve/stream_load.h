// The load generator of brisk bench-serve: many streaming completions in flight at once,
// driven by one thread over non-blocking sockets (epoll), HTTP/1.1 with keep-alive.
//
// Why not a thread a request: on the 2-core machines brisk is measured on, the client shares
// the cores with the server it measures. With a blocking HTTP client in 16 threads, every
// streamed token woke one of them (poll, recv, a context switch): ~30 us of CPU a token,
// a sixth of both cores at 16 concurrent streams, which the server's own threads then lacked.
// One thread woken per burst of ready sockets does the same reading in ~7 us a token.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace brisk {

// One request as the client saw it.
struct StreamSample {
  bool ok = false;
  std::string error;
  double ttft = 0, tpot = 0, latency = 0;  // seconds
  std::vector<double> itl;                 // gaps between chunks that carried tokens
  int completion_tokens = 0, prompt_tokens = 0, cached_tokens = 0;
};

struct StreamLoad {
  std::string host;        // name or address
  int port = 80;
  std::string path;        // e.g. /v1/completions
  std::string api_key;     // sent as a bearer token when not empty
  int concurrency = 1;     // requests in flight at most
  int requests = 1;        // requests to send (unless duration_s > 0)
  double duration_s = 0;   // > 0: send until this many seconds have passed
  double rate = 0;         // > 0: Poisson arrivals a second; 0: back to back
  uint64_t seed = 1;       // of the arrival times
  std::function<std::string(int)> body;  // the JSON body of request i
};

// Runs the load; returns every finished or failed request's sample and sets *wall_s to
// the time from the first request to the last answer.
std::vector<StreamSample> run_stream_load(const StreamLoad& load, double* wall_s);

}  // namespace brisk
