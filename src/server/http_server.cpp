#include "server/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/log.h"

namespace tmill::server {

namespace {

thread_local int tl_socket = -1;
thread_local bool tl_close_after = false;

// poll() one fd for `events`, retrying on EINTR. >0 ready, 0 timeout, <0 error.
int poll_fd(int fd, short events, int timeout_ms, short* revents = nullptr) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (revents) *revents = p.revents;
    return r;
  }
}

void addr_to_string(const sockaddr_storage& ss, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

// A connected socket as an httplib::Stream: reads through a 4 KiB buffer (httplib reads request
// lines byte by byte), timeouts via poll(), writes with MSG_NOSIGNAL.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(int fd, int read_timeout_s, int write_timeout_s)
      : fd_(fd), read_ms_(read_timeout_s * 1000), write_ms_(write_timeout_s * 1000) {}

  bool buffered() const { return off_ < len_; }

  bool is_readable() const override { return buffered() || poll_fd(fd_, POLLIN, read_ms_) > 0; }
  bool is_writable() const override { return poll_fd(fd_, POLLOUT, write_ms_) > 0 && !HttpServer::peer_closed(fd_); }

  ssize_t read(char* ptr, size_t size) override {
    if (buffered()) {
      const size_t n = std::min(size, len_ - off_);
      std::memcpy(ptr, buf_ + off_, n);
      off_ += n;
      return static_cast<ssize_t>(n);
    }
    if (poll_fd(fd_, POLLIN, read_ms_) <= 0) return -1;
    for (;;) {
      if (size >= sizeof buf_) {
        const ssize_t r = ::recv(fd_, ptr, size, 0);
        if (r < 0 && errno == EINTR) continue;
        return r;
      }
      const ssize_t r = ::recv(fd_, buf_, sizeof buf_, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return r;
      off_ = 0;
      len_ = static_cast<size_t>(r);
      const size_t n = std::min(size, len_);
      std::memcpy(ptr, buf_, n);
      off_ = n;
      return static_cast<ssize_t>(n);
    }
  }

  ssize_t write(const char* ptr, size_t size) override {
    size_t done = 0;
    while (done < size) {
      const ssize_t r = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r > 0) {
        done += static_cast<size_t>(r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (poll_fd(fd_, POLLOUT, write_ms_) > 0) continue;  // a slow client: wait up to the write timeout
      }
      return done > 0 ? static_cast<ssize_t>(done) : -1;
    }
    return static_cast<ssize_t>(done);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) addr_to_string(ss, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) addr_to_string(ss, ip, port);
  }
  socket_t socket() const override { return fd_; }

 private:
  int fd_;
  int read_ms_, write_ms_;
  char buf_[4096];
  size_t off_ = 0, len_ = 0;
};

}  // namespace

void ElasticPool::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(std::move(fn));
  if (idle_ < jobs_.size() && threads_.size() < max_) threads_.emplace_back([this] { worker(); });
  cv_.notify_one();
}

void ElasticPool::worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    idle_++;
    cv_.wait(lock, [this] { return shutdown_ || !jobs_.empty(); });
    idle_--;
    if (jobs_.empty()) return;  // shutdown with nothing left
    std::function<void()> fn = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    fn();
    lock.lock();
  }
}

void ElasticPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

size_t ElasticPool::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

HttpServer::HttpServer(HttpOptions options, HttpHandler& handler)
    : opt_(std::move(options)), handler_(handler), pool_(static_cast<size_t>(opt_.max_threads)) {
  // Body limits: the handler's before_body (by Content-Length) and read_body below (while reading
  // chunked bodies, which httplib 0.11.4 does not bound).
  set_keep_alive_timeout(opt_.keep_alive_timeout_s);  // advertised in the Keep-Alive header
  set_keep_alive_max_count(static_cast<size_t>(opt_.keep_alive_max_requests));
  install_handlers();
}

namespace {

HttpRequest head_of(const httplib::Request& req) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  for (const auto& [k, v] : req.headers) r.headers.emplace_back(k, v);
  r.client_gone = [] { return HttpServer::client_disconnected(); };
  return r;
}

class SinkAdapter final : public ChunkSink {
 public:
  explicit SinkAdapter(httplib::DataSink& sink) : sink_(sink) {}
  bool write(std::string_view d) override { return sink_.write(d.data(), d.size()); }
  void done() override { sink_.done(); }

 private:
  httplib::DataSink& sink_;
};

void to_httplib(HttpResponse&& from, httplib::Response& res) {
  res.status = from.status;
  for (auto& [k, v] : from.headers) res.set_header(k.c_str(), v);
  if (from.close_connection) {
    res.set_header("Connection", "close");
    HttpServer::close_after_response();
  }
  if (from.streaming()) {
    auto next = std::make_shared<std::function<bool(ChunkSink&)>>(std::move(from.next_chunk));
    auto on_close = std::make_shared<std::function<void()>>(std::move(from.on_close));
    res.set_chunked_content_provider(
        from.content_type,
        [next](size_t, httplib::DataSink& sink) {
          SinkAdapter a(sink);
          return (*next)(a);
        },
        [on_close](bool) {
          if (*on_close) (*on_close)();
        });
  } else if (!from.body.empty() || !from.content_type.empty()) {
    res.set_content(std::move(from.body), from.content_type.c_str());
  }
}

}  // namespace

void HttpServer::install_handlers() {
  set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    auto early = handler_.before_body(head_of(req));
    if (!early) return httplib::Server::HandlerResponse::Unhandled;
    to_httplib(std::move(*early), res);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Every request that before_body let through reaches the handler, with its body read here.
  auto dispatch = [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader* reader) {
    HttpRequest r = head_of(req);
    if (reader) {
      const size_t max = handler_.max_body_bytes();
      bool too_large = false;
      const bool ok = (*reader)([&](const char* d, size_t n) {
        if (r.body.size() + n > max) {
          too_large = true;
          return false;
        }
        r.body.append(d, n);
        return true;
      });
      if (!ok || too_large) {
        HttpResponse e = handler_.body_error(too_large, r);
        e.close_connection = true;  // the rest of the body stays unread
        to_httplib(std::move(e), res);
        return;
      }
    }
    to_httplib(handler_.handle(r), res);
  };
  Get(".*", [dispatch](const httplib::Request& req, httplib::Response& res) { dispatch(req, res, nullptr); });
  Post(".*", [dispatch](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& rd) {
    dispatch(req, res, &rd);
  });
  // httplib's own errors (malformed request line or headers, URI too long).
  set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // a route already answered
    HttpResponse e = handler_.transport_error(res.status, head_of(req));
    for (auto& [k, v] : e.headers) res.set_header(k.c_str(), v);
    res.set_content(std::move(e.body), e.content_type.c_str());
    return httplib::Server::HandlerResponse::Handled;
  }));
  set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    log_error("http handler exception: {}", what);
    to_httplib(handler_.internal_error(what), res);
  });
}

HttpServer::~HttpServer() { shutdown(); }

int HttpServer::current_socket() { return tl_socket; }

void HttpServer::close_after_response() { tl_close_after = true; }

bool HttpServer::peer_closed(int fd) {
  short rev = 0;
  if (poll_fd(fd, POLLIN | POLLRDHUP, 0, &rev) <= 0) return false;
  if (rev & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return true;
  if (rev & POLLIN) {
    char c;
    const ssize_t r = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }
  return false;
}

Result<int> HttpServer::bind() {
  const int port = opt_.port == 0 ? bind_to_any_port(opt_.host) : (bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
  if (port <= 0) return Error{fmt::format("cannot listen on {}:{} (address in use or not available)", opt_.host, opt_.port)};
  const int fd = svr_sock_.load();
  ::listen(fd, opt_.backlog);  // httplib listens with a backlog of 5; a second listen() raises it
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  port_ = port;
  return port;
}

void HttpServer::start() {
  accept_thread_ = std::thread([this] { accept_loop(); });
}

void HttpServer::accept_loop() {
  const int lfd = svr_sock_.load();
  while (!stop_accept_.load()) {
    if (poll_fd(lfd, POLLIN, 100) <= 0) continue;
    const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) {
        log_warn("http: out of file descriptors, pausing accept");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // tokens must not wait for Nagle
    open_++;
    pool_.enqueue([this, fd] {
      serve_connection(fd);
      open_--;
    });
  }
}

bool HttpServer::wait_for_request(int fd, int timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (closing_.load()) return false;
    short rev = 0;
    const int r = poll_fd(fd, POLLIN, 100, &rev);
    if (r < 0) return false;
    if (r > 0) return true;  // data, or EOF that process_request will see
  }
  return false;
}

void HttpServer::serve_connection(int fd) {
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    conns_.insert(fd);
  }
  ConnStream strm(fd, opt_.read_timeout_s, opt_.write_timeout_s);
  tl_socket = fd;
  int remaining = std::max(1, opt_.keep_alive_max_requests);
  bool first = true;
  while (remaining > 0) {
    const int wait_s = first ? opt_.read_timeout_s : opt_.keep_alive_timeout_s;
    if (!strm.buffered() && !wait_for_request(fd, wait_s)) break;
    first = false;
    const bool close_after = remaining == 1 || closing_.load();
    bool closed_by_client = false;
    tl_close_after = false;
    const bool ok = process_request(strm, close_after, closed_by_client, nullptr);
    if (!ok || closed_by_client || close_after || tl_close_after) break;
    --remaining;
  }
  tl_socket = -1;
  if (tl_close_after) linger_close(fd);
  std::lock_guard<std::mutex> lock(conns_mu_);
  conns_.erase(fd);
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}

// Closing a socket with unread request data makes the kernel send RST, which can destroy the
// response we just sent (a 413 for a body still being uploaded, say). So: send FIN first, then read
// and drop what the client still sends, for at most 2 s / 16 MiB, as nginx's lingering close does.
void HttpServer::linger_close(int fd) {
  tl_close_after = false;
  ::shutdown(fd, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  size_t dropped = 0;
  char buf[16384];
  while (dropped < (16u << 20) && std::chrono::steady_clock::now() < deadline) {
    if (poll_fd(fd, POLLIN, 100) <= 0) {
      if (closing_.load()) break;
      continue;
    }
    const ssize_t r = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) break;
    if (r > 0) dropped += static_cast<size_t>(r);
  }
}

void HttpServer::stop_accepting() {
  closing_ = true;
  if (stop_accept_.exchange(true)) return;
  if (accept_thread_.joinable()) accept_thread_.join();
  const int fd = svr_sock_.load();
  // shutdown() on a listening socket makes the kernel refuse new connections while the fd (and
  // svr_sock_, which httplib's streaming loop checks) stays valid until shutdown().
  if (fd != INVALID_SOCKET) ::shutdown(fd, SHUT_RDWR);
}

void HttpServer::shutdown() {
  stop_accepting();
  {
    // Unblock connections still reading a request (slow clients): their reads fail at once.
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (int fd : conns_) ::shutdown(fd, SHUT_RDWR);
  }
  pool_.shutdown();
  const int fd = svr_sock_.exchange(INVALID_SOCKET);
  if (fd != INVALID_SOCKET) ::close(fd);
}

}  // namespace tmill::server
