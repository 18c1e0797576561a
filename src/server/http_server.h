// The HTTP/1.1 transport: one I/O thread runs an epoll loop (level-triggered) that accepts
// connections, reads and parses requests (server/http_parser.h) and writes responses; complete
// requests go to a pool of worker threads that call the HttpHandler, which may block (waiting for the
// engine, streaming tokens). So an open connection costs a socket and a small Conn record, never a
// thread: idle keep-alive connections, connections that send nothing, and slowloris requests cost
// nothing but memory, bounded per connection, and time out.
//
// Writes: a worker appends a response to its connection's output buffer and sends what the socket
// takes at once; the rest is sent by the I/O thread when the socket is writable. A stream whose
// client stops reading waits while the buffer is above output_buffer_max_bytes and fails its write
// after write_timeout_s (the route then aborts the generation and frees its KV).
//
// Who owns what: only the I/O thread registers, re-arms and closes sockets; a worker holds a
// connection (shared_ptr) while its handler runs and tells the I/O thread when it is done through
// a queue and an eventfd. A connection is never closed while a worker holds it; one that fails or
// hangs up meanwhile is marked gone (the handler sees client_gone()).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "server/http.h"
#include "server/http_parser.h"
#include "server/memory_budget.h"
#include "server/tls.h"

namespace tmill::server {

// Runs jobs on up to max_threads threads, starting threads only when none is idle.
class ElasticPool {
 public:
  explicit ElasticPool(size_t max_threads) : max_(max_threads) {}
  ~ElasticPool() { shutdown(); }
  void enqueue(std::function<void()> fn);
  void shutdown();  // runs the queued jobs, joins every thread
  size_t threads() const;

 private:
  void worker();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  size_t max_;
  bool shutdown_ = false;
};

class HttpServer {
 public:
  struct Conn;  // one connection's state (http_server.cpp)

  // `handler` must outlive the server.
  HttpServer(HttpOptions options, HttpHandler& handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  Result<int> bind();  // listens (raising the open-file limit for max_connections); returns the port
  void start();        // the I/O thread
  // Stops accepting (new connections are refused), closes idle connections; busy ones close after
  // their current response.
  void stop_accepting();
  // Lets responses already handled finish sending (briefly), then closes everything and joins all
  // threads. Responses still streaming are cut.
  void shutdown();

  int port() const { return port_; }
  size_t open_connections() const { return open_.load(); }
  // The memory that bytes received, request bodies, their parsing and output buffers hold.
  const MemoryBudget& memory() const { return budget_; }
  bool closing() const { return closing_.load(); }

  // True when the peer of `fd` has closed or reset the connection (a non-blocking check). A client
  // that half-closes its sending side counts as gone.
  static bool peer_closed(int fd);

 private:
  enum class Msg { WantWrite, Done, StopAccepting, Shutdown };

  void io_loop();
  void on_accept();
  void on_event(const std::shared_ptr<Conn>& c, uint32_t events);
  void process_input(const std::shared_ptr<Conn>& c);
  void begin_request(const std::shared_ptr<Conn>& c, size_t head_end);
  void dispatch(const std::shared_ptr<Conn>& c);
  void answer_from_io(const std::shared_ptr<Conn>& c, HttpResponse res);
  void after_write(const std::shared_ptr<Conn>& c);
  void finish_response(const std::shared_ptr<Conn>& c);
  void close_conn(const std::shared_ptr<Conn>& c);
  void set_interest(Conn& c, uint32_t events);
  void check_timeouts(int64_t now_ms);
  void handle_messages();

  // Worker side.
  void run_handler(const std::shared_ptr<Conn>& c, HttpRequest req, uint64_t charge);
  void run_response(const std::shared_ptr<Conn>& c, HttpResponse res, bool head_only);
  bool append_output(const std::shared_ptr<Conn>& c, std::string_view bytes, bool wait_for_room);
  void post(const std::shared_ptr<Conn>& c, Msg m);

  HttpOptions opt_;
  HttpLimits limits_;
  HttpHandler& handler_;
  MemoryBudget budget_;  // before every member that holds connections: they give their bytes back to it
  int port_ = -1;
  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1, spare_fd_ = -1;
  std::thread io_thread_;
  std::atomic<bool> stop_io_{false};
  std::atomic<bool> closing_{false};
  std::atomic<bool> stopped_accepting_{false};
  std::atomic<size_t> open_{0};
  std::atomic<size_t> busy_{0};  // connections a worker holds or that still send a response
  std::unordered_map<int, std::shared_ptr<Conn>> conns_;  // I/O thread only
  std::mutex msg_mu_;
  std::condition_variable msg_cv_;
  std::vector<std::pair<std::shared_ptr<Conn>, Msg>> msgs_;
  bool accept_stopped_ack_ = false, cut_ack_ = false;
  int64_t last_scan_ms_ = 0, last_full_warn_ms_ = 0;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
  std::unique_ptr<TlsContext> tls_;  // null: plain HTTP
  ElasticPool pool_;
};

}  // namespace tmill::server
