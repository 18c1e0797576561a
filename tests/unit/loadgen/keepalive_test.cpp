// OpenAiClient against a server that closes kept-alive connections (llama-server answers
// "Keep-Alive" after a stream but closes the connection; a client that reuses it loses the race). The
// server here is a raw socket so that it can close a connection exactly when the next request arrives,
// without any response — httplib's server would answer "Connection: close" instead.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "loadgen/client.h"

namespace tmill::loadgen {
namespace {

// Serves one streamed completion per connection, then closes the connection when the client sends
// anything more (or when `serve_first` is false, closes a connection as soon as its first request
// arrives).
class ClosingServer {
 public:
  explicit ClosingServer(bool serve_first) : serve_first_(serve_first) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(lfd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    EXPECT_EQ(::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(lfd_, 8), 0);
    socklen_t len = sizeof a;
    ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~ClosingServer() {
    ::shutdown(lfd_, SHUT_RDWR);
    ::close(lfd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  int served() const { return served_.load(); }

 private:
  // Reads one request (headers and Content-Length body); false when the peer closed first.
  static bool read_request(int fd) {
    std::string in;
    char buf[4096];
    size_t need = std::string::npos;
    while (need == std::string::npos || in.size() < need) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      in.append(buf, static_cast<size_t>(n));
      const size_t end = in.find("\r\n\r\n");
      if (need == std::string::npos && end != std::string::npos) {
        size_t body = 0;
        const size_t cl = in.find("Content-Length: ");
        if (cl != std::string::npos && cl < end) body = std::stoul(in.substr(cl + 16));
        need = end + 4 + body;
      }
    }
    return true;
  }
  void run() {
    for (;;) {
      const int fd = ::accept(lfd_, nullptr, nullptr);
      if (fd < 0) return;
      ++connections_;
      if (serve_first_ && read_request(fd)) {
        const std::string body =
            "data: {\"choices\":[{\"index\":0,\"text\":\"hi\",\"finish_reason\":null}]}\n\n"
            "data: {\"choices\":[{\"index\":0,\"text\":\" there\",\"finish_reason\":\"length\"}]}\n\n"
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n"
            "data: [DONE]\n\n";
        const std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\nKeep-Alive: timeout=5, max=100\r\n\r\n";
        const std::string out = head + body;
        ++served_;  // before the answer leaves, so a client that has it sees the count
        EXPECT_EQ(::send(fd, out.data(), out.size(), MSG_NOSIGNAL), static_cast<ssize_t>(out.size()));
      }
      // Wait for the next request (or the client's close), then close without answering.
      char c;
      ::recv(fd, &c, 1, MSG_PEEK);
      ::close(fd);
    }
  }

  bool serve_first_;
  int lfd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> connections_{0}, served_{0};
};

nlohmann::json body() {
  Prompt p;
  p.text = "one two three";
  return build_request_body(Endpoint::Completions, "m", p, 2, false);
}

TEST(OpenAiClientKeepAlive, ResendsOnceWhenTheServerClosedAReusedConnection) {
  ClosingServer server(true);
  auto url = parse_base_url(server.url());
  ASSERT_TRUE(url.ok());
  OpenAiClient client(url.value(), "", 10.0);
  std::vector<RequestResult> results;
  for (int i = 0; i < 3; ++i) {
    results.push_back(client.stream(Endpoint::Completions, body()));
    const RequestResult& r = results.back();
    EXPECT_TRUE(r.success) << "request " << i << ": " << r.error;
    EXPECT_EQ(r.output_tokens, 2);
    EXPECT_EQ(r.resent, i > 0);
  }
  EXPECT_EQ(count_resent(results), 2);
  // Requests 2 and 3 each met a closed connection and went out again on a new one.
  EXPECT_EQ(server.served(), 3);
  EXPECT_EQ(server.connections(), 3);
}

TEST(OpenAiClientKeepAlive, AFreshConnectionClosedWithoutAnswerIsAFailureNotARetry) {
  ClosingServer server(false);
  auto url = parse_base_url(server.url());
  ASSERT_TRUE(url.ok());
  OpenAiClient client(url.value(), "", 10.0);
  // Twice: after the first failure the client holds no connection, so the second request also goes
  // out on a new one, which is no reason to send it again either.
  std::vector<RequestResult> results;
  for (int i = 0; i < 2; ++i) {
    results.push_back(client.stream(Endpoint::Completions, body()));
    const RequestResult& r = results.back();
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.failure, FailureKind::Connection);
    EXPECT_FALSE(r.resent);
  }
  EXPECT_EQ(count_resent(results), 0);
  EXPECT_EQ(server.connections(), 2);
}

}  // namespace
}  // namespace tmill::loadgen
