// The request side of the transport's I/O thread (http_server.h): parsing what a connection has
// received (head, then body), the handler's before_body, handing complete requests to a worker, and
// what happens once a response is sent (keep-alive, or a lingering close).
#include <sys/epoll.h>
#include <sys/socket.h>

#include <utility>

#include "core/log.h"
#include "server/http_conn.h"
#include "server/http_server.h"

namespace tmill::server {

// Parses what `in` holds: the head, then the body, then hands the request to a worker.
void HttpServer::process_input(const std::shared_ptr<Conn>& c) {
  while (!c->in.empty() && (c->st == Conn::St::Head || c->st == Conn::St::Body)) {
    if (c->st == Conn::St::Head) {
      if (!c->started) {
        c->started = true;
        c->deadline = now_ms() + opt_.header_timeout_s * 1000LL;
      }
      // Search for a line end only in new bytes (a slowloris client sends one byte at a time).
      const bool new_line = c->in.find('\n', c->scanned) != std::string::npos;
      c->scanned = c->in.size();
      int status = 0;
      size_t end = 0;
      if (new_line || c->in.size() > limits_.max_request_line) end = find_head_end(c->in, limits_, &status);
      if (status == 0 && end == 0) return;  // wait for more
      c->head = RequestHead{};
      if (status == 0) status = parse_request_head(std::string_view(c->in).substr(0, end), limits_, c->head);
      if (status != 0) {
        c->close_after = true;
        HttpRequest h;
        h.method = c->head.method;
        h.path = c->head.path;
        c->in.clear();
        HttpResponse res;
        try {
          res = handler_.transport_error(status, h);
        } catch (const std::exception& e) {
          res = handler_.internal_error(e.what());
        }
        answer_from_io(c, std::move(res));
        return;
      }
      begin_request(c, end);
      continue;
    }
    // Body.
    const size_t max = handler_.max_body_bytes();
    size_t used = 0;
    bool complete = false, failed = false, too_large = false;
    if (c->discard_body) {  // shed: read and drop
      if (c->head.chunked) {
        used = c->chunked.feed(c->in, c->body, ~size_t{0});
        complete = c->chunked.done();
        failed = c->chunked.error();
        c->body.clear();
        if (c->body.capacity() > (64u << 10)) c->body.shrink_to_fit();
      } else {
        used = static_cast<size_t>(std::min<uint64_t>(c->body_left, c->in.size()));
        c->body_left -= used;
        complete = c->body_left == 0;
      }
    } else if (c->head.chunked) {
      used = c->chunked.feed(c->in, c->body, max);
      complete = c->chunked.done();
      failed = c->chunked.error();
      too_large = c->chunked.too_large();
      if (!failed && !budget_.adjust(&c->body_charge, c->body.capacity(), false)) {  // a chunked body grows
        budget_.count_refusal();  // the rest is read and dropped, then answered
        c->discard_body = true;
        c->shed_need = c->body.capacity();
        c->body = std::string();
        budget_.adjust(&c->body_charge, 0, true);
      }
    } else {
      used = static_cast<size_t>(std::min<uint64_t>(c->body_left, c->in.size()));
      c->body.append(c->in, 0, used);
      c->body_left -= used;
      complete = c->body_left == 0;
    }
    c->in.erase(0, used);
    c->deadline = now_ms() + opt_.read_timeout_s * 1000LL;
    if (failed) {
      HttpRequest h;
      h.method = c->head.method;
      h.path = c->head.path;
      h.headers = c->head.headers;
      c->close_after = true;
      c->in.clear();
      answer_from_io(c, handler_.body_error(too_large, h));
      return;
    }
    if (complete && c->discard_body) {
      HttpRequest h;
      h.method = c->head.method;
      h.path = c->head.path;
      h.headers = c->head.headers;
      c->discard_body = false;
      c->body = std::string();
      answer_from_io(c, handler_.memory_full(c->shed_need, budget_.limit(), h));
      return;  // keep-alive: finish_response goes on with a pipelined request
    }
    if (complete) dispatch(c);
  }
}

// A complete head: the handler's before_body, then the body or the handler.
void HttpServer::begin_request(const std::shared_ptr<Conn>& c, size_t head_end) {
  c->in.erase(0, head_end);
  c->scanned = 0;
  c->requests++;
  c->close_after = !c->head.keep_alive || c->requests >= opt_.keep_alive_max_requests || closing_.load();
  c->body.clear();
  c->chunked = ChunkedDecoder{};
  HttpRequest h;
  h.method = c->head.method;
  h.path = c->head.path;
  h.query = c->head.query;
  h.headers = c->head.headers;
  std::weak_ptr<Conn> weak = c;
  h.client_gone = [weak] {
    auto c = weak.lock();
    return !c || c->gone.load();
  };
  std::optional<HttpResponse> early;
  try {
    early = handler_.before_body(h);
  } catch (const std::exception& e) {
    early = handler_.internal_error(e.what());
  }
  if (!early && !c->head.chunked && c->head.content_length.value_or(0) > handler_.max_body_bytes()) {
    early = handler_.body_error(true, h);
  }
  // The body's bytes are counted before they arrive: one that does not fit now is shed (503), one
  // larger than the whole budget refused (413).
  const uint64_t body_len = c->head.chunked ? 0 : c->head.content_length.value_or(0);
  c->discard_body = false;
  if (!early && body_len > 0) {
    if (budget_.limit() != 0 && body_len > budget_.limit()) {
      budget_.count_refusal();
      early = handler_.memory_full(body_len, budget_.limit(), h);
    } else if (budget_.try_reserve(body_len)) {
      c->body_charge = body_len;
      c->body.reserve(body_len);
    } else {  // read and dropped, then answered 503 (process_input)
      budget_.count_refusal();
      c->discard_body = true;
      c->shed_need = body_len;
    }
  }
  if (early) {
    if (c->head.has_body()) c->close_after = true;  // its body stays unread
    answer_from_io(c, std::move(*early));
    return;
  }
  if (c->head.has_body()) {
    if (c->head.expect_continue) {
      std::lock_guard<std::mutex> lock(c->mu);
      c->out.append("HTTP/1.1 100 Continue\r\n\r\n");
      c->flush_locked();
    }
    c->st = Conn::St::Body;
    c->body_left = c->head.content_length.value_or(0);
    const int64_t now = now_ms();
    c->body_deadline = now + opt_.body_timeout_s * 1000LL;
    c->deadline = now + opt_.read_timeout_s * 1000LL;
    return;  // process_input goes on with the body
  }
  dispatch(c);
}

void HttpServer::dispatch(const std::shared_ptr<Conn>& c) {
  c->st = Conn::St::Handling;
  busy_++;
  HttpRequest req;
  req.method = c->head.method;
  req.path = c->head.path;
  req.query = c->head.query;
  req.headers = std::move(c->head.headers);
  req.body = std::move(c->body);
  c->body = std::string();
  std::weak_ptr<Conn> weak = c;
  const int fd = c->fd;
  req.client_gone = [weak, fd] {
    auto c = weak.lock();
    return !c || c->gone.load() || HttpServer::peer_closed(fd);
  };
  {
    std::lock_guard<std::mutex> lock(c->mu);
    set_interest(*c, c->pending() > 0 ? (EPOLLRDHUP | EPOLLOUT) : EPOLLRDHUP);
  }
  // The body's charge goes with it to the worker, which adds what handling it takes.
  const uint64_t charge = std::exchange(c->body_charge, 0);
  pool_.enqueue([this, c, req = std::move(req), charge]() mutable { run_handler(c, std::move(req), charge); });
}

// A response the I/O thread itself produced (errors, before_body's answers).
void HttpServer::answer_from_io(const std::shared_ptr<Conn>& c, HttpResponse res) {
  c->st = Conn::St::Handling;
  busy_++;
  set_interest(*c, EPOLLRDHUP);
  if (res.streaming()) {  // unusual: let a worker run it
    const bool head_only = c->head.method == "HEAD";
    pool_.enqueue([this, c, res = std::move(res), head_only]() mutable {
      run_response(c, std::move(res), head_only);
      post(c, Msg::Done);
    });
    return;
  }
  run_response(c, std::move(res), c->head.method == "HEAD");
  c->st = Conn::St::Writing;
  after_write(c);
}

// Sends what is pending; once all is sent, the response is over.
void HttpServer::after_write(const std::shared_ptr<Conn>& c) {
  bool failed, done;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    failed = !c->flush_locked() || c->gone;
    done = c->pending() == 0;
  }
  if (failed) return close_conn(c);
  if (!done) {
    set_interest(*c, EPOLLOUT);
    c->deadline = now_ms() + opt_.write_timeout_s * 1000LL;
    return;
  }
  finish_response(c);
}

void HttpServer::finish_response(const std::shared_ptr<Conn>& c) {
  busy_--;
  if (c->close_after || closing_.load()) {
    // Closing with unread request data makes the kernel send RST, which can destroy the response
    // just sent (a 413 for a body still being uploaded): send FIN, then read and drop what the
    // client still sends for a while (nginx's lingering close).
    if (c->ssl) {
      tls_close(std::exchange(c->ssl, nullptr));  // close_notify first
    }
    ::shutdown(c->fd, SHUT_WR);
    c->st = Conn::St::Linger;
    c->deadline = now_ms() + kLingerMs;
    c->in.clear();
    set_interest(*c, EPOLLIN);
    return;
  }
  c->st = Conn::St::Head;
  c->started = false;
  c->scanned = 0;
  c->head = RequestHead{};
  c->deadline = now_ms() + opt_.keep_alive_timeout_s * 1000LL;
  if (c->in.empty()) {
    std::string().swap(c->in);  // an idle keep-alive connection holds no buffer
  } else if (c->in.capacity() > (64u << 10)) {
    c->in.shrink_to_fit();
  }
  budget_.adjust(&c->in_charge, c->in.capacity(), true);
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->pending() == 0) {
      std::string().swap(c->out);
      c->out_off = 0;
      c->charge_out_locked();
    }
  }
  set_interest(*c, EPOLLIN);
  if (!c->in.empty()) process_input(c);  // a pipelined request
}

}  // namespace tmill::server
