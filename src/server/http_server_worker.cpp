// The worker side of the transport (http_server.h): runs the handler, writes the response into the
// connection's output buffer (head, body or chunks), waits while a slow reader's buffer is full, and
// tells the I/O thread when the response is over.
#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "core/log.h"
#include "core/memory.h"
#include "server/http_conn.h"
#include "server/http_server.h"

namespace tmill::server {

namespace {

constexpr uint64_t kTrimAfterBytes = 8u << 20;

bool skip_header(std::string_view name) {
  auto ieq = [&](std::string_view b) {
    return name.size() == b.size() &&
           std::equal(name.begin(), name.end(), b.begin(), [](char x, char y) { return (x | 0x20) == (y | 0x20); });
  };
  // The transport frames the message itself.
  return ieq("Content-Length") || ieq("Transfer-Encoding") || ieq("Connection") || ieq("Keep-Alive");
}

std::string response_head(const HttpResponse& res, bool chunked, bool close, int minor, int keep_alive_s) {
  std::string h = fmt::format("HTTP/1.{} {} {}\r\n", minor, res.status, http_reason(res.status));
  for (const auto& [k, v] : res.headers)
    if (!skip_header(k)) h += fmt::format("{}: {}\r\n", k, v);
  if (!res.content_type.empty()) h += fmt::format("Content-Type: {}\r\n", res.content_type);
  if (res.streaming()) {
    if (chunked) h += "Transfer-Encoding: chunked\r\n";
  } else {
    h += fmt::format("Content-Length: {}\r\n", res.body.size());
  }
  if (close) h += "Connection: close\r\n";
  else h += fmt::format("Connection: keep-alive\r\nKeep-Alive: timeout={}\r\n", keep_alive_s);
  h += "\r\n";
  return h;
}

}  // namespace

// Appends bytes to the output and sends what the socket takes; with wait_for_room, waits while more
// than output_buffer_max_bytes are pending (a client that does not read), up to the write timeout.
bool HttpServer::append_output(const std::shared_ptr<Conn>& cp, std::string_view bytes, bool wait_for_room) {
  Conn& c = *cp;
  std::unique_lock<std::mutex> lock(c.mu);
  if (c.gone) return false;
  if (c.pending() == 0) c.last_write = now_ms();
  c.out.append(bytes);
  c.charge_out_locked();
  if (!c.flush_locked()) return false;
  if (c.pending() > 0 && !c.want_write_posted) {
    c.want_write_posted = true;
    lock.unlock();
    post(cp, Msg::WantWrite);  // the I/O thread sends the rest when the socket is writable
    lock.lock();
  }
  if (!wait_for_room) return !c.gone;
  // Wait while this buffer is over its cap, or while the transport's memory is over its budget and
  // this buffer still holds bytes (a stream whose reader lags stops growing it).
  auto full = [&] { return c.pending() > opt_.output_buffer_max_bytes || (budget_.over() && c.pending() > 0); };
  while (!c.gone && full()) {
    const auto until = std::chrono::steady_clock::time_point(std::chrono::milliseconds(c.last_write)) +
                       std::chrono::seconds(opt_.write_timeout_s);
    if (c.cv.wait_until(lock, until) == std::cv_status::timeout && full() &&
        now_ms() - c.last_write >= opt_.write_timeout_s * 1000LL) {
      c.gone = true;
      break;
    }
  }
  return !c.gone;
}

namespace {

// Chunks of a streamed response into the connection's output buffer.
class ConnSink final : public ChunkSink {
 public:
  ConnSink(std::function<bool(std::string_view, bool)> out, bool chunked) : out_(std::move(out)), chunked_(chunked) {}
  bool write(std::string_view data) override {
    if (data.empty()) return true;  // an empty chunk would end the body
    if (!chunked_) return out_(data, true);
    std::string framed = fmt::format("{:x}\r\n", data.size());
    framed.append(data);
    framed += "\r\n";
    return out_(framed, true);
  }
  void done() override {
    finished_ = true;
    if (chunked_) out_("0\r\n\r\n", false);
  }
  bool finished() const { return finished_; }

 private:
  std::function<bool(std::string_view, bool)> out_;
  bool chunked_;
  bool finished_ = false;
};

}  // namespace

void HttpServer::run_handler(const std::shared_ptr<Conn>& c, HttpRequest req, uint64_t charge) {
  HttpResponse res;
  // What handling the body takes (parsing, prompts, token ids), counted on top of its bytes until the
  // response is over; a request without a body counts nothing, so /health and /metrics always answer.
  const uint64_t need = req.body.empty() ? 0 : std::max(charge, request_memory_estimate(req.body));
  const bool fits = need <= charge || budget_.try_reserve(need - charge);
  if (fits) {
    charge = std::max(charge, need);
  } else {
    budget_.count_refusal();
  }
  try {
    if (!fits) {
      res = handler_.memory_full(need, budget_.limit(), req);
    } else {
      res = handler_.handle(req);
    }
  } catch (const std::exception& e) {
    log_error("http handler exception: {}", e.what());
    res = handler_.internal_error(e.what());
  } catch (...) {
    log_error("http handler exception: unknown");
    res = handler_.internal_error("unknown exception");
  }
  run_response(c, std::move(res), req.method == "HEAD");
  req = HttpRequest{};
  budget_.release(charge);
  // A large request's memory (parse trees, token ids: many small blocks in this thread's malloc
  // arena) goes back to the system rather than staying resident in that arena.
  if (charge >= kTrimAfterBytes) release_free_memory();
  post(c, Msg::Done);
}

void HttpServer::run_response(const std::shared_ptr<Conn>& c, HttpResponse res, bool head_only) {
  if (res.close_connection || closing_.load()) c->close_after = true;
  const int minor = c->head.minor;
  if (!res.streaming()) {
    std::string out = response_head(res, false, c->close_after, minor, opt_.keep_alive_timeout_s);
    if (!head_only) out += res.body;
    append_output(c, out, false);
    if (res.on_close) res.on_close();
    return;
  }
  // HTTP/1.0 has no chunked encoding: the body ends when the connection closes.
  const bool chunked = minor >= 1;
  if (!chunked) c->close_after = true;
  bool ok = append_output(c, response_head(res, chunked, c->close_after, minor, opt_.keep_alive_timeout_s), false);
  ConnSink sink([this, c](std::string_view d, bool wait) { return append_output(c, d, wait); }, chunked);
  while (ok && !head_only && !sink.finished()) {
    try {
      ok = res.next_chunk(sink);
    } catch (const std::exception& e) {
      log_error("http stream exception: {}", e.what());
      ok = false;
    }
  }
  if (!ok) c->abort = true;  // cut: the client must not take it for a complete response
  if (res.on_close) res.on_close();
}

}  // namespace tmill::server
