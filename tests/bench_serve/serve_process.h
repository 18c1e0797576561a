// A real `tokenmill serve` as a child process, for tests that load-test it end to end.
//
//   auto srv = ServeProcess::start(binary, {"--kv-cache-memory", "640KiB"}, dir + "/serve.log");
//   // ... srv->url() is "http://127.0.0.1:PORT"; srv->metrics() scrapes GET /metrics
//   srv->stop();  // also done by the destructor
//
// The server listens on a free loopback port (--port 0; the port is read from its log line
// "listening on http://HOST:PORT"), start() returns once GET /health answers 200. The child gets
// PR_SET_PDEATHSIG(SIGKILL), so it dies with the test process even when the test crashes or ctest
// kills it on a timeout; stop() sends SIGTERM (the server drains and exits 0) and SIGKILL after a
// grace period.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace tmill::test {

class ServeProcess {
 public:
  // Runs `binary serve --port 0 --threads 2 ARGS...` (ARGS may override --threads), stdout and stderr
  // appended to log_path. Fails when the server exits early or is not healthy within timeout_s.
  static Result<std::unique_ptr<ServeProcess>> start(const std::string& binary, const std::vector<std::string>& args,
                                                     const std::string& log_path, double timeout_s = 180);
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const;  // the log file's text so far

  // GET /metrics parsed with the load tester's Prometheus parser (name -> value, label sets added up;
  // histogram series appear as NAME_sum / NAME_count).
  Result<std::map<std::string, double>> metrics() const;

  // SIGTERM, wait up to grace_s for the exit, then SIGKILL. Returns the exit status of a normal exit
  // (0 after a clean drain), or -SIGNAL. Idempotent.
  int stop(double grace_s = 30);

 private:
  ServeProcess() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  int status_ = 0;
  std::string log_path_;
};

}  // namespace tmill::test
