#include "serve_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <system_error>
#include <thread>

#include "core/mmap.h"
#include "loadgen/client.h"
#include "loadgen/metrics_scraper.h"

namespace tmill::test {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Polling period while waiting for the server: short, since each wait is a condition we check.
constexpr auto kPoll = std::chrono::milliseconds(20);

// The port of the server's "listening on http://HOST:PORT" log line, 0 while it is not there yet
// (a line still being written has no digits after the colon yet, or no space after them).
int listening_port(const std::string& log) {
  static const std::string kPrefix = "listening on http://";
  const size_t at = log.find(kPrefix);
  if (at == std::string::npos) return 0;
  const size_t colon = log.find(':', at + kPrefix.size());
  if (colon == std::string::npos) return 0;
  const char* end = log.data() + log.size();
  int port = 0;
  const auto [next, ec] = std::from_chars(log.data() + colon + 1, end, port);
  if (ec != std::errc() || next == end || port <= 0 || port > 65535) return 0;  // no digits, or the line is cut off
  return port;
}

}  // namespace

Result<std::unique_ptr<ServeProcess>> ServeProcess::start(const std::string& binary,
                                                          const std::vector<std::string>& args,
                                                          const std::string& log_path, double timeout_s) {
  std::vector<std::string> argv_s = {binary, "serve", "--port", "0"};
  bool threads = false;
  for (const auto& a : args) threads |= a == "--threads";
  if (!threads) argv_s.insert(argv_s.end(), {"--threads", "2"});
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Error{"cannot open " + log_path};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    return Error{"fork failed"};
  }
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  std::unique_ptr<ServeProcess> p(new ServeProcess());
  p->pid_ = pid;
  p->log_path_ = log_path;

  const auto t0 = Clock::now();
  auto exited = [&]() -> bool {
    int st = 0;
    if (::waitpid(p->pid_, &st, WNOHANG) != p->pid_) return false;
    p->status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
    p->pid_ = -1;
    return true;
  };
  // 1. The port, from the "listening on http://HOST:PORT" log line.
  while (p->port_ == 0) {
    const std::string text = p->log();
    if (int port = listening_port(text); port > 0) {
      p->port_ = port;
      break;
    }
    if (exited()) return Error{"tokenmill serve exited early (status " + std::to_string(p->status_) + "):\n" + text};
    if (since(t0) > timeout_s) return Error{"tokenmill serve did not start listening:\n" + text};
    std::this_thread::sleep_for(kPoll);
  }
  // 2. Ready: GET /health answers 200 (503 while the model loads).
  auto url = loadgen::parse_base_url(p->url());
  if (!url) return Error{url.error()};
  loadgen::OpenAiClient client(*url, "", 10);
  while (!client.get("/health", 10).ok()) {
    if (exited()) return Error{"tokenmill serve exited (status " + std::to_string(p->status_) + "):\n" + p->log()};
    if (since(t0) > timeout_s) return Error{"tokenmill serve not healthy in time:\n" + p->log()};
    std::this_thread::sleep_for(kPoll);
  }
  return p;
}

ServeProcess::~ServeProcess() { stop(); }

std::string ServeProcess::log() const {
  auto t = read_file(log_path_);
  return t ? *t : std::string();
}

Result<std::map<std::string, double>> ServeProcess::metrics() const {
  auto u = loadgen::parse_base_url(url());
  if (!u) return Error{u.error()};
  loadgen::OpenAiClient client(*u, "", 30);
  TM_ASSIGN_OR_RETURN(auto body, client.get("/metrics", 30));
  return loadgen::parse_prometheus_text(body);
}

int ServeProcess::stop(double grace_s) {
  if (pid_ <= 0) return status_;
  ::kill(pid_, SIGTERM);
  const auto t0 = Clock::now();
  int st = 0;
  while (::waitpid(pid_, &st, WNOHANG) != pid_) {
    if (since(t0) > grace_s) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &st, 0);
      break;
    }
    std::this_thread::sleep_for(kPoll);
  }
  status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
  pid_ = -1;
  return status_;
}

}  // namespace tmill::test
