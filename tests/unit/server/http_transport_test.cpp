// The event-driven transport (HttpServer) over loopback with a stub HttpHandler: keep-alive and
// pipelining, Expect: 100-continue, idle connections that do not delay a real request, the header
// timeout (slowloris), the open-connection limit, a bounded chunked body, a stream to a client that
// stops reading (its write fails after the write timeout), and client_gone after a hang-up.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace tmill::server;
using namespace std::chrono_literals;

namespace {

// Polls `done` until it holds or `limit` has passed; returns whether it holds.
bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  return done();
}

class StubHandler final : public HttpHandler {
 public:
  std::atomic<bool> stream_write_failed{false}, stream_closed{false}, saw_gone{false};
  std::atomic<bool> release_hold{false}, holding{false};
  size_t max_body = 1024;

  std::optional<HttpResponse> before_body(const HttpRequest& head) override {
    if (head.path == "/early") return plain(404, "early");
    return std::nullopt;
  }
  size_t max_body_bytes() const override { return max_body; }
  HttpResponse handle(HttpRequest& req) override {
    if (req.path == "/echo") return plain(200, req.method + " " + req.body);
    if (req.path == "/hold") {  // keeps its body (and its memory charge) until released
      holding = true;
      wait_for([this] { return release_hold.load(); }, 10s);
      holding = false;
      return plain(200, "held " + std::to_string(req.body.size()));
    }
    if (req.path == "/wait-gone") {  // waits until the client hangs up
      wait_for([&req] { return req.disconnected(); }, 10s);
      saw_gone = req.disconnected();
      return plain(200, "late");
    }
    if (req.path == "/stream") {
      HttpResponse r;
      r.content_type = "text/plain";
      auto sent = std::make_shared<int>(0);
      r.next_chunk = [this, sent](ChunkSink& sink) {
        if (++*sent > 400) {  // 400 x 64 KiB: far more than the socket buffers take
          sink.done();
          return true;
        }
        if (!sink.write(std::string(64 << 10, 'x'))) {
          stream_write_failed = true;
          return false;
        }
        return true;
      };
      r.on_close = [this] { stream_closed = true; };
      return r;
    }
    return plain(200, "ok");
  }
  HttpResponse body_error(bool too_large, const HttpRequest&) override { return plain(too_large ? 413 : 400, "body"); }
  HttpResponse transport_error(int status, const HttpRequest&) override { return plain(status, "transport"); }
  HttpResponse internal_error(const std::string& what) override { return plain(500, what); }
  HttpResponse memory_full(uint64_t needed, uint64_t limit, const HttpRequest&) override {
    HttpResponse r = plain(needed > limit ? 413 : 503, "memory " + std::to_string(needed));
    r.close_connection = true;
    return r;
  }

 private:
  static HttpResponse plain(int status, std::string body) {
    HttpResponse r;
    r.status = status;
    r.content_type = "text/plain";
    r.body = std::move(body);
    return r;
  }
};

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void send_all(int fd, const std::string& s) { ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), (ssize_t)s.size()); }

// Reads until `until` appears, the peer closes, or the time is up.
std::string read_until(int fd, const std::string& until, std::chrono::milliseconds limit = 5000ms, bool* closed = nullptr) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!until.empty() && got.find(until) != std::string::npos) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    char buf[65536];
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) {
      if (closed) *closed = true;
      break;
    }
    got.append(buf, static_cast<size_t>(r));
  }
  return got;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) n++;
  return n;
}

struct Fixture {
  StubHandler handler;
  std::unique_ptr<HttpServer> server;
  explicit Fixture(HttpOptions o = {}) {
    o.port = 0;
    server = std::make_unique<HttpServer>(o, handler);
    EXPECT_TRUE(server->bind().ok());
    server->start();
  }
  int port() const { return server->port(); }
};

// A client that asks for /stream with a tiny receive buffer and never reads: returns its socket once
// the handler's stream has ended (its write failed at the write timeout), or after 10 s.
int stalled_stream(Fixture& f) {
  const int fd = connect_to(f.port());
  const int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  send_all(fd, "GET /stream HTTP/1.1\r\n\r\n");
  wait_for([&f] { return f.handler.stream_closed.load(); }, 10s);
  return fd;
}

}  // namespace

TEST(HttpTransport, KeepAliveAndPipelining) {
  Fixture f;
  const int fd = connect_to(f.port());
  send_all(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\n\r\n");
  std::string got;
  for (int i = 0; i < 100 && count(got, "HTTP/1.1 200 OK") < 3; i++) got += read_until(fd, "", 50ms);
  EXPECT_EQ(count(got, "HTTP/1.1 200 OK"), 3u) << got;
  EXPECT_NE(got.find("POST hello"), std::string::npos) << got;
  EXPECT_NE(got.find("Connection: keep-alive"), std::string::npos);
  // Connection: close is honoured, and the connection really closes.
  send_all(fd, "GET /c HTTP/1.1\r\nConnection: close\r\n\r\n");
  bool closed = false;
  const std::string last = read_until(fd, "", 3000ms, &closed);
  EXPECT_TRUE(closed);
  EXPECT_NE(last.find("Connection: close"), std::string::npos) << last;
  ::close(fd);
}

TEST(HttpTransport, ExpectContinueAndEarlyAnswers) {
  Fixture f;
  int fd = connect_to(f.port());
  send_all(fd, "POST /echo HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_NE(read_until(fd, "\r\n\r\n").find("HTTP/1.1 100 Continue"), std::string::npos);
  send_all(fd, "abc");
  EXPECT_NE(read_until(fd, "POST abc").find("POST abc"), std::string::npos);
  ::close(fd);
  // before_body's answer: no 100, the body is never read, the connection closes after it.
  fd = connect_to(f.port());
  send_all(fd, "POST /early HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n");
  bool closed = false;
  const std::string got = read_until(fd, "", 3000ms, &closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 404", 0), 0u) << got;
  EXPECT_TRUE(closed);
  ::close(fd);
}

TEST(HttpTransport, BoundedChunkedBodyAndMalformedHeads) {
  Fixture f;
  int fd = connect_to(f.port());
  send_all(fd, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
  EXPECT_NE(read_until(fd, "POST abc").find("POST abc"), std::string::npos);
  std::string big = "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4; i++) big += "200\r\n" + std::string(512, 'y') + "\r\n";
  send_all(fd, big);
  EXPECT_NE(read_until(fd, "body").find("HTTP/1.1 413"), std::string::npos);
  ::close(fd);
  fd = connect_to(f.port());
  send_all(fd, "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_NE(read_until(fd, "transport").find("HTTP/1.1 414"), std::string::npos);
  ::close(fd);
}

TEST(HttpTransport, IdleConnectionsDoNotDelayARequest) {
  HttpOptions o;
  o.max_threads = 4;  // far fewer threads than connections
  Fixture f(o);
  std::vector<int> idle;
  for (int i = 0; i < 300; i++) {  // 600 descriptors in this process: under a 1024 limit
    const int fd = connect_to(f.port());
    ASSERT_GE(fd, 0);
    if (i % 2) send_all(fd, "POST /v1/chat/comp");  // half a request line
    idle.push_back(fd);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = connect_to(f.port());
  send_all(fd, "GET /health HTTP/1.1\r\n\r\n");
  const std::string got = read_until(fd, "\r\n\r\nok");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(got.find("200 OK"), std::string::npos);
  EXPECT_LT(s, 1.0);
  EXPECT_GE(f.server->open_connections(), 300u);
  ::close(fd);
  for (int i : idle) ::close(i);
}

TEST(HttpTransport, HeaderTimeoutClosesSlowloris) {
  HttpOptions o;
  o.header_timeout_s = 1;
  Fixture f(o);
  const int fd = connect_to(f.port());
  send_all(fd, "GET /health HTTP/1.1\r\nX-A: 1\r\n");
  bool closed = false;
  const auto t0 = std::chrono::steady_clock::now();
  read_until(fd, "", 4000ms, &closed);
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
  ::close(fd);
}

TEST(HttpTransport, ConnectionLimit) {
  HttpOptions o;
  o.max_connections = 5;
  Fixture f(o);
  std::vector<int> fds;
  for (int i = 0; i < 5; i++) fds.push_back(connect_to(f.port()));
  std::this_thread::sleep_for(200ms);
  const int extra = connect_to(f.port());  // accepted by the kernel, closed by the server
  bool closed = false;
  read_until(extra, "", 2000ms, &closed);
  EXPECT_TRUE(closed);
  send_all(fds[0], "GET /x HTTP/1.1\r\n\r\n");  // the first five are served
  EXPECT_NE(read_until(fds[0], "\r\n\r\nok").find("200 OK"), std::string::npos);
  ::close(extra);
  for (int fd : fds) ::close(fd);
}

TEST(HttpTransport, StreamToAClientThatStopsReadingFails) {
  HttpOptions o;
  o.output_buffer_max_bytes = 64 << 10;
  o.write_timeout_s = 1;
  Fixture f(o);
  const int fd = stalled_stream(f);
  EXPECT_TRUE(f.handler.stream_write_failed);
  EXPECT_TRUE(f.handler.stream_closed);
  ::close(fd);
}

TEST(HttpTransport, ClientGoneWhileHandling) {
  Fixture f;
  const int fd = connect_to(f.port());
  send_all(fd, "GET /wait-gone HTTP/1.1\r\n\r\n");
  std::this_thread::sleep_for(200ms);
  ::close(fd);
  EXPECT_TRUE(wait_for([&f] { return f.handler.saw_gone.load(); }, 5s));
}

TEST(HttpTransport, ShutdownRefusesNewConnections) {
  Fixture f;
  const int port = f.port();
  const int fd = connect_to(port);
  send_all(fd, "GET /x HTTP/1.1\r\n\r\n");
  EXPECT_NE(read_until(fd, "\r\n\r\nok").find("200 OK"), std::string::npos);
  f.server->stop_accepting();
  EXPECT_EQ(connect_to(port), -1);
  f.server->shutdown();
  ::close(fd);
}

// The transport's memory budget (HttpOptions::buffer_memory_bytes): a body is counted from its
// head on (Content-Length) and, once read, with what handling it takes (request_memory_estimate);
// a body that does not fit now is shed (503), one larger than the budget refused (413); requests
// without a body still answer; everything counted is given back.
TEST(HttpTransport, MemoryBudgetShedsBodiesThatDoNotFit) {
  HttpOptions o;
  o.buffer_memory_bytes = 400 << 10;
  Fixture f(o);
  f.handler.max_body = 1 << 20;
  const std::string body(100 << 10, 'x');  // estimated at 16 KiB + the bytes + one value
  auto post = [&](const std::string& path, const std::string& b) {
    return "POST " + path + " HTTP/1.1\r\nContent-Length: " + std::to_string(b.size()) + "\r\n\r\n" + b;
  };
  const int holder = connect_to(f.port());
  send_all(holder, post("/hold", body));
  ASSERT_TRUE(wait_for([&f] { return f.handler.holding.load(); }, 5s));
  const uint64_t held = f.server->memory().used();
  EXPECT_GE(held, request_memory_estimate(body));
  EXPECT_LE(held, 400u << 10);

  const std::string big(300 << 10, 'y');  // its bytes fit beside the held request, not its handling
  int fd = connect_to(f.port());
  send_all(fd, post("/echo", big));
  EXPECT_NE(read_until(fd, "memory").find("503"), std::string::npos);
  ::close(fd);
  fd = connect_to(f.port());  // more than the whole budget: 413 before any body byte is read
  send_all(fd, "POST /echo HTTP/1.1\r\nContent-Length: 500000\r\n\r\n");
  EXPECT_NE(read_until(fd, "memory").find("413"), std::string::npos);
  ::close(fd);
  fd = connect_to(f.port());  // no body: answered whatever the budget holds
  send_all(fd, "GET /x HTTP/1.1\r\n\r\n");
  EXPECT_NE(read_until(fd, "\r\n\r\nok").find("200 OK"), std::string::npos);
  ::close(fd);
  EXPECT_GE(f.server->memory().refused(), 2u);

  f.handler.release_hold = true;
  EXPECT_NE(read_until(holder, "held 102400").find("200 OK"), std::string::npos);
  fd = connect_to(f.port());  // room again
  send_all(fd, post("/echo", std::string(1000, 'z')));
  EXPECT_NE(read_until(fd, std::string(1000, 'z')).find("200 OK"), std::string::npos);
  ::close(fd);
  ::close(holder);
  wait_for([&f] { return f.server->memory().used() == 0; }, 5s);
  EXPECT_EQ(f.server->memory().used(), 0u);
  EXPECT_LE(f.server->memory().peak(), 400u << 10);
}

// A stream whose reader stops: with the budget smaller than the connection's own output cap, the
// buffer stops growing at the budget (one chunk over at most), and the write fails at the timeout.
TEST(HttpTransport, MemoryBudgetBoundsAStreamsOutputBuffer) {
  HttpOptions o;
  o.buffer_memory_bytes = 256 << 10;
  o.output_buffer_max_bytes = 16 << 20;
  o.write_timeout_s = 1;
  Fixture f(o);
  const int fd = stalled_stream(f);
  EXPECT_TRUE(f.handler.stream_write_failed);
  // The output string grows by doubling: its capacity is at most twice what it holds.
  EXPECT_LE(f.server->memory().peak(), 2 * ((256u << 10) + (66u << 10)));
  ::close(fd);
}
