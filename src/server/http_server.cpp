#include "server/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "core/log.h"
#include "server/http_conn.h"

namespace tmill::server {

namespace {

constexpr uint64_t kListenTag = ~0ull, kWakeTag = ~0ull - 1;

}  // namespace

// ---------------------------------------------------------------------------------------------
// ElasticPool

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

// ---------------------------------------------------------------------------------------------
// Set-up and tear-down

HttpServer::HttpServer(HttpOptions options, HttpHandler& handler)
    : opt_(std::move(options)),
      handler_(handler),
      budget_(opt_.buffer_memory_bytes),
      pool_(static_cast<size_t>(std::max(1, opt_.max_threads))) {
  limits_.max_request_line = opt_.max_request_line;
  limits_.max_header_bytes = opt_.max_header_bytes;
  limits_.max_header_line = std::max<size_t>(opt_.max_request_line, 8192);
  limits_.max_headers = opt_.max_headers;
}

HttpServer::~HttpServer() { shutdown(); }

bool HttpServer::peer_closed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) != 0;
}

namespace {

// Raises RLIMIT_NOFILE's soft limit towards `want` descriptors; returns what is available.
rlim_t raise_fd_limit(rlim_t want) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur >= want) return rl.rlim_cur;
  rlimit next = rl;
  next.rlim_cur = rl.rlim_max == RLIM_INFINITY ? want : std::min(want, rl.rlim_max);
  if (::setrlimit(RLIMIT_NOFILE, &next) == 0) return next.rlim_cur;
  return rl.rlim_cur;
}

}  // namespace

Result<int> HttpServer::bind() {
  // Descriptors: one per connection, plus the engine's files, logs and a reserve.
  const rlim_t want = static_cast<rlim_t>(opt_.max_connections) + 256;
  const rlim_t have = raise_fd_limit(want);
  if (have < want) {
    const int fit = have > 256 ? static_cast<int>(have - 256) : 16;
    log_warn("open-file limit is {} (hard limit too low for --max-connections {}): at most {} connections; "
             "raise it with `ulimit -n {}`",
             have, opt_.max_connections, fit, want);
    opt_.max_connections = fit;
  }
  if (!opt_.ssl_certfile.empty() || !opt_.ssl_keyfile.empty()) {
    TlsOptions t{opt_.ssl_certfile, opt_.ssl_keyfile, opt_.ssl_ca_certs, opt_.ssl_cert_reqs};
    TM_ASSIGN_OR_RETURN(tls_, TlsContext::create(t));
    log_info("TLS on (TLS 1.2+; certificate {}{})", opt_.ssl_certfile,
             opt_.ssl_cert_reqs == 2 ? ", client certificates required"
             : opt_.ssl_cert_reqs == 1 ? ", client certificates optional" : "");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(opt_.port);
  if (::getaddrinfo(opt_.host.empty() ? nullptr : opt_.host.c_str(), port.c_str(), &hints, &res) != 0 || !res)
    return Error{fmt::format("cannot listen on {}:{} (unknown address)", opt_.host, opt_.port)};
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, opt_.backlog) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) return Error{fmt::format("cannot listen on {}:{} (address in use or not available)", opt_.host, opt_.port)};
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  port_ = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                   : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  listen_fd_ = fd;
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // given up to accept-and-close at EMFILE
  if (epoll_fd_ < 0 || wake_fd_ < 0) return Error{std::string("epoll/eventfd: ") + std::strerror(errno)};
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kWakeTag;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  return port_;
}

void HttpServer::start() {
  io_thread_ = std::thread([this] { io_loop(); });
}

void HttpServer::post(const std::shared_ptr<Conn>& c, Msg m) {
  {
    std::lock_guard<std::mutex> lock(msg_mu_);
    msgs_.emplace_back(c, m);
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(wake_fd_, &one, sizeof one);
}

void HttpServer::stop_accepting() {
  closing_ = true;
  if (stopped_accepting_.exchange(true) || listen_fd_ < 0) return;
  if (!io_thread_.joinable()) {
    ::shutdown(listen_fd_, SHUT_RDWR);
    return;
  }
  post(nullptr, Msg::StopAccepting);
  // Wait until the I/O thread has stopped listening: after this returns, connects are refused.
  std::unique_lock<std::mutex> lock(msg_mu_);
  msg_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return accept_stopped_ack_; });
}

void HttpServer::shutdown() {
  std::lock_guard<std::mutex> guard(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  stop_accepting();
  // Responses already produced get a moment to reach their clients.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (busy_.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (io_thread_.joinable()) {
    post(nullptr, Msg::Shutdown);  // cuts every connection: workers see gone, nothing new is dispatched
    std::unique_lock<std::mutex> lock(msg_mu_);
    msg_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return cut_ack_; });
  }
  pool_.shutdown();
  stop_io_ = true;
  post(nullptr, Msg::Shutdown);
  if (io_thread_.joinable()) io_thread_.join();
  for (auto& [fd, c] : conns_) {
    tls_close(std::exchange(c->ssl, nullptr));
    ::close(fd);
  }
  conns_.clear();
  open_ = 0;
  for (int* fd : {&listen_fd_, &epoll_fd_, &wake_fd_, &spare_fd_})
    if (*fd >= 0) ::close(std::exchange(*fd, -1));
}

// ---------------------------------------------------------------------------------------------
// The I/O thread

void HttpServer::io_loop() {
  std::vector<epoll_event> evs(512);
  while (!stop_io_.load()) {
    const int n = ::epoll_wait(epoll_fd_, evs.data(), static_cast<int>(evs.size()), 100);
    for (int i = 0; i < n; i++) {
      const uint64_t tag = evs[i].data.u64;
      if (tag == kListenTag) {
        on_accept();
      } else if (tag == kWakeTag) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof v);
      } else {
        auto it = conns_.find(static_cast<int>(tag));
        if (it != conns_.end()) on_event(it->second, evs[i].events);
      }
    }
    handle_messages();
    const int64_t now = now_ms();
    if (now - last_scan_ms_ >= 100) {
      last_scan_ms_ = now;
      check_timeouts(now);
    }
  }
}

void HttpServer::on_accept() {
  for (int i = 0; i < 256 && !stopped_accepting_.load(); i++) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
        // Out of descriptors: accept and close one (the client sees a reset instead of waiting).
        ::close(spare_fd_);
        const int f = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (f >= 0) ::close(f);
        spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        const int64_t now = now_ms();
        if (now - last_full_warn_ms_ > 5000) {
          last_full_warn_ms_ = now;
          log_warn("http: out of file descriptors with {} connections open; refusing new ones", open_.load());
        }
      }
      return;
    }
    if (open_.load() >= static_cast<size_t>(opt_.max_connections)) {
      ::close(fd);
      const int64_t now = now_ms();
      if (now - last_full_warn_ms_ > 5000) {
        last_full_warn_ms_ = now;
        log_warn("http: {} connections open (--max-connections); refusing new ones", open_.load());
      }
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // tokens must not wait for Nagle
    auto c = std::make_shared<Conn>();
    c->fd = fd;
    c->budget = &budget_;
    if (tls_ && !(c->ssl = tls_->new_session(fd))) {
      ::close(fd);
      continue;
    }
    c->deadline = now_ms() + opt_.header_timeout_s * 1000LL;
    conns_.emplace(fd, c);
    open_++;
    set_interest(*c, EPOLLIN);
  }
}

void HttpServer::set_interest(Conn& c, uint32_t events) {
  if (c.events == events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = static_cast<uint64_t>(c.fd);
  if (events == 0) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, &ev);
  else ::epoll_ctl(epoll_fd_, c.events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd, &ev);
  c.events = events;
}

void HttpServer::close_conn(const std::shared_ptr<Conn>& c) {
  if (c->st == Conn::St::Handling) {  // a worker holds it: cut, and close when it is done
    c->gone = true;
    ::shutdown(c->fd, SHUT_RDWR);
    std::lock_guard<std::mutex> lock(c->mu);
    c->cv.notify_all();
    return;
  }
  if (c->st == Conn::St::Writing) busy_--;
  set_interest(*c, 0);
  tls_close(std::exchange(c->ssl, nullptr));
  ::close(c->fd);
  conns_.erase(c->fd);
  open_--;
}

void HttpServer::on_event(const std::shared_ptr<Conn>& c, uint32_t events) {
  if (c->st == Conn::St::Handling) {
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      std::lock_guard<std::mutex> lock(c->mu);
      c->gone = true;
      c->cv.notify_all();
      set_interest(*c, 0);  // level-triggered: stop hearing about it; the worker's Done closes it
      return;
    }
    if (events & EPOLLOUT) {
      std::lock_guard<std::mutex> lock(c->mu);
      c->want_write_posted = false;
      c->flush_locked();
      if (c->pending() == 0 || c->gone) set_interest(*c, c->gone ? 0u : static_cast<uint32_t>(EPOLLRDHUP));
    }
    return;
  }
  if (c->st == Conn::St::Writing) {
    if (events & (EPOLLHUP | EPOLLERR)) return close_conn(c);
    after_write(c);
    return;
  }
  // Head, Body, Linger: read (a few rounds, then the next epoll turn; TLS bytes already decrypted
  // inside the session raise no epoll event, so those are always taken).
  static thread_local char buf[65536];
  for (int round = 0;; round++) {
    const bool linger = c->st == Conn::St::Linger;
    ssize_t r;
    if (linger) {  // dropped unread, TLS or not
      r = ::recv(c->fd, buf, sizeof buf, 0);
      if (r < 0) r = (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? -1 : -2;
    } else {
      r = c->recv_some(buf, sizeof buf);
    }
    if (r == 0 || r == -2) return close_conn(c);  // closed (mid-request or between requests), failed
    if (r == -1) break;
    if (linger) {
      c->linger_bytes += static_cast<size_t>(r);
      if (c->linger_bytes > kLingerMaxBytes) return close_conn(c);
    } else {
      c->in.append(buf, static_cast<size_t>(r));
    }
    if (round >= 3 && !(c->ssl && !linger && tls_pending(c->ssl))) break;
  }
  if (c->st == Conn::St::Linger) return;
  process_input(c);
  // What stays in `in` (a head still arriving, pipelined bytes) is counted; the bytes of one read
  // burst are not (a single I/O thread: at most one burst, 256 KiB, at a time).
  if (c->in.capacity() > (64u << 10) && c->in.size() < (16u << 10)) c->in.shrink_to_fit();
  budget_.adjust(&c->in_charge, c->in.capacity(), true);
  const auto open = conns_.find(c->fd);
  if (open == conns_.end() || open->second != c) return;  // process_input closed it
  if (budget_.over() && c->st == Conn::St::Head && c->in.size() > kHeadBytesWhenFull) {
    // The transport's memory is full: a connection sending a large head is shed (small heads go on, so
    // /health and requests without bodies still answer; bodies are shed by begin_request).
    budget_.count_refusal();
    close_conn(c);
  }
}

void HttpServer::handle_messages() {
  std::vector<std::pair<std::shared_ptr<Conn>, Msg>> msgs;
  {
    std::lock_guard<std::mutex> lock(msg_mu_);
    msgs.swap(msgs_);
  }
  for (auto& [c, m] : msgs) {
    switch (m) {
      case Msg::WantWrite: {
        if (c->st != Conn::St::Handling || c->events == 0) break;
        std::lock_guard<std::mutex> lock(c->mu);
        if (c->pending() > 0 && !c->gone) set_interest(*c, EPOLLRDHUP | EPOLLOUT);
        break;
      }
      case Msg::Done:
        if (c->abort || c->gone) {
          c->st = Conn::St::Head;  // not Handling any more: close_conn closes it
          busy_--;
          close_conn(c);
        } else {
          c->st = Conn::St::Writing;
          after_write(c);
        }
        break;
      case Msg::StopAccepting: {
        if (listen_fd_ >= 0) {
          epoll_event ev{};
          ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, &ev);
          ::shutdown(listen_fd_, SHUT_RDWR);  // the kernel refuses new connections from now on
        }
        // Idle connections (between requests, or before their first byte) close now.
        std::vector<std::shared_ptr<Conn>> idle;
        for (auto& [fd, cc] : conns_)
          if (cc->st == Conn::St::Head && cc->in.empty()) idle.push_back(cc);
        for (auto& cc : idle) close_conn(cc);
        std::lock_guard<std::mutex> lock(msg_mu_);
        accept_stopped_ack_ = true;
        msg_cv_.notify_all();
        break;
      }
      case Msg::Shutdown: {
        std::vector<std::shared_ptr<Conn>> all;
        for (auto& [fd, cc] : conns_) all.push_back(cc);
        for (auto& cc : all) close_conn(cc);
        std::lock_guard<std::mutex> lock(msg_mu_);
        cut_ack_ = true;
        msg_cv_.notify_all();
        break;
      }
    }
  }
}

void HttpServer::check_timeouts(int64_t now) {
  std::vector<std::shared_ptr<Conn>> expired;
  for (auto& [fd, c] : conns_) {
    switch (c->st) {
      case Conn::St::Head:
      case Conn::St::Linger:
      case Conn::St::Writing:
        if (now >= c->deadline) expired.push_back(c);
        break;
      case Conn::St::Body:
        if (now >= c->deadline || now >= c->body_deadline) expired.push_back(c);
        break;
      case Conn::St::Handling: {
        std::lock_guard<std::mutex> lock(c->mu);
        if (c->pending() > 0 && now - c->last_write >= opt_.write_timeout_s * 1000LL) {
          c->gone = true;  // a reader that stopped reading: the stream's next write fails
          c->cv.notify_all();
        }
        break;
      }
    }
  }
  for (auto& c : expired) close_conn(c);
}

}  // namespace tmill::server
