// Starts `brisk serve` on a free loopback port for a test and stops it with SIGTERM.
#pragma once
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace brisk::test {

class ServeProcess {
 public:
  // Starts BRISK_BINARY_DIR/brisk serve --port 0 <args> and waits for /health.
  // ok() is false (and error() says why) when it did not come up.
  explicit ServeProcess(std::vector<std::string> args = {}, std::string api_key = "");
  ~ServeProcess();  // SIGTERM, then SIGKILL if it does not exit
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  bool ok() const { return port_ > 0; }
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  int pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const;  // what the server wrote to stderr

  httplib::Client client() const;  // with the API key, long timeouts

  // SIGTERM; returns the exit status (128 + signal when killed), -1 if it hangs past 20 s.
  int stop();

  // Reads a metric value (first sample of that name) from /metrics; NaN when missing.
  double metric(const std::string& name) const;
  // Polls /metrics until kv blocks used and running sequences are 0 (true) or 20 s pass.
  bool wait_idle() const;

 private:
  int pid_ = -1;
  int port_ = 0;
  std::string api_key_, out_path_, err_path_, error_;
};

// POSTs a JSON body (as given, not re-encoded) and returns status + parsed body
// (null when not JSON).
struct HttpResult {
  int status = -1;
  std::string body;
  nlohmann::json json;
};
HttpResult post_raw(httplib::Client& cli, const std::string& path, const std::string& body,
                    const std::string& content_type = "application/json");

}  // namespace brisk::test
