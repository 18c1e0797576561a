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

namespace tmill::server {

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

  std::mutex mu;
  std::condition_variable cv;
  std::string out;  // to send, from out_off
  size_t out_off = 0;
  int64_t last_write = 0;  // ms: when the output last progressed (or became pending)
  bool want_write_posted = false;
  std::atomic<bool> gone{false};

  size_t pending() const { return out.size() - out_off; }
  // Sends what the socket takes now (mu held). False when the connection failed.
  bool flush_locked() {
    while (out_off < out.size()) {
      const ssize_t r = ::send(fd, out.data() + out_off, out.size() - out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r > 0) {
        out_off += static_cast<size_t>(r);
        last_write = now_ms();
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      gone = true;
      cv.notify_all();
      return false;
    }
    out.clear();
    out_off = 0;
    if (out.capacity() > (64u << 10)) std::string().swap(out);
    cv.notify_all();
    return true;
  }
};

}  // namespace tmill::server
