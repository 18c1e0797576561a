// One connection of the event-driven transport (http_server.h): its parsing state, owned by the I/O
// thread, and its output buffer, shared with the worker that runs its handler. Private to
// http_server*.cpp.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "server/http_parser.h"
#include "server/http_server.h"
#include "server/memory_budget.h"
#include "server/tls.h"

namespace tmill::server {

constexpr size_t kLingerMaxBytes = 16u << 20;  // a lingering close drops at most this much
constexpr int kLingerMs = 2000;                  // ... for at most this long
// While the transport's memory budget is full, a connection whose unparsed head grows past this is
// shed (closed): heads of ordinary requests are smaller.
constexpr size_t kHeadBytesWhenFull = 8192;

inline int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One connection. Fields above `mu` belong to the I/O thread (and to the worker that holds the
// connection while it is Handling, for `req_head`/`close_after`, handed over through the message
// queue); those below are shared and guarded by `mu`.
struct HttpServer::Conn {
  enum class St : uint8_t { Head, Body, Handling, Writing, Linger };
  int fd = -1;
  SSL* ssl = nullptr;  // the TLS session, when TLS is on
  St st = St::Head;
  uint32_t events = 0;      // registered epoll events; 0: not registered
  bool started = false;     // bytes of the current request received
  bool close_after = false; // close once the current response is sent
  bool abort = false;       // the response was cut: close without finishing it
  int requests = 0;
  size_t scanned = 0;       // `in` bytes already searched for a line end
  size_t linger_bytes = 0;
  int64_t deadline = 0;       // ms: the current state's time limit
  int64_t body_deadline = 0;  // ms: the whole body's
  uint64_t body_left = 0;
  std::string in;  // received, not yet consumed
  RequestHead head;
  std::string body;
  ChunkedDecoder chunked;
  // Bytes of the transport's MemoryBudget this connection holds (I/O thread): what `in` and `body`
  // take (a body's whole Content-Length once its head is accepted).
  uint64_t in_charge = 0, body_charge = 0;
  // The body did not fit the budget: it is read and dropped, then answered memory_full (the client
  // gets a clean 503 instead of a connection closed under its upload). `shed_need`: what it needed.
  bool discard_body = false;
  uint64_t shed_need = 0;
  MemoryBudget* budget = nullptr;

  std::mutex mu;
  std::condition_variable cv;
  std::string out;  // to send, from out_off
  size_t out_off = 0;
  int64_t last_write = 0;  // ms: when the output last progressed (or became pending)
  bool want_write_posted = false;
  std::atomic<bool> gone{false};
  uint64_t out_charge = 0;  // what `out` takes, counted in `budget` (mu)

  ~Conn() {
    if (budget) budget->release(in_charge + body_charge + out_charge);
  }
  size_t pending() const { return out.size() - out_off; }
  // Socket or TLS I/O: >0 bytes, 0 the peer closed, -1 would block, -2 failed.
  ssize_t recv_some(char* buf, size_t n) {
    if (ssl) return tls_read(ssl, buf, n);
    for (;;) {
      const ssize_t r = ::recv(fd, buf, n, 0);
      if (r >= 0) return r;
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
    }
  }
  ssize_t send_some(const char* buf, size_t n) {
    if (ssl) return tls_write(ssl, buf, n);
    for (;;) {
      const ssize_t r = ::send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r >= 0) return r == 0 ? -1 : r;
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : -2;
    }
  }
  // Sends what the socket takes now (mu held). False when the connection failed.
  bool flush_locked() {
    while (out_off < out.size()) {
      const ssize_t r = send_some(out.data() + out_off, out.size() - out_off);
      if (r > 0) {
        out_off += static_cast<size_t>(r);
        last_write = now_ms();
        continue;
      }
      if (r == -1) return true;  // would block
      gone = true;
      cv.notify_all();
      return false;
    }
    out.clear();
    out_off = 0;
    if (out.capacity() > (64u << 10)) std::string().swap(out);
    charge_out_locked();
    cv.notify_all();
    return true;
  }
  // Counts what `out` holds now (mu held). Bytes already appended are counted even above the limit;
  // a stream then waits for its reader (HttpServer::append_output).
  void charge_out_locked() {
    if (budget) budget->adjust(&out_charge, out.capacity(), true);
  }
};

}  // namespace tmill::server
