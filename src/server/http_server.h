// The HTTP transport: cpp-httplib 0.11.4 parses requests and writes responses
// (Server::process_request), this class turns them into the transport-neutral HttpRequest /
// HttpResponse of server/http.h and drives an HttpHandler with them (no route sees httplib), and it
// owns the sockets around it:
//  - the listening socket (httplib binds it; we raise its backlog from the compiled-in 5 and run our
//    own accept loop, so stopping to accept never cuts responses in flight),
//  - one thread per connection from an elastic pool (up to max_threads; httplib's default pool has
//    only max(8, cores - 1) threads, too few for hundreds of open SSE streams),
//  - a buffered socket Stream with poll()-based timeouts (no FD_SETSIZE limit in our code), and
//  - the socket of the connection each handler runs on (thread-local), so a handler can notice that
//    its client went away while it waits for the engine.
// httplib's chunked content providers stop when svr_sock_ is INVALID_SOCKET; we keep it valid until
// every connection is closed.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/result.h"
#include "server/http.h"

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

class HttpServer : public httplib::Server {
 public:
  // `handler` must outlive the server.
  HttpServer(HttpOptions options, HttpHandler& handler);
  ~HttpServer() override;

  Result<int> bind();        // listens; returns the port
  void start();              // the accept loop on its own thread
  // Stops accepting (new connections are refused), and makes idle keep-alive connections close and
  // busy ones close after their current response.
  void stop_accepting();
  // Closes everything and joins all threads. Responses still streaming are cut.
  void shutdown();

  int port() const { return port_; }
  size_t open_connections() const { return open_.load(); }
  bool closing() const { return closing_.load(); }

  // The socket of the connection the calling (handler) thread serves, -1 outside a handler.
  static int current_socket();
  // True when the peer of `fd` has closed or reset the connection (a non-blocking check). A client
  // that half-closes its sending side counts as gone.
  static bool peer_closed(int fd);
  static bool client_disconnected() { return current_socket() >= 0 && peer_closed(current_socket()); }
  // Called from a handler: close this connection after the response (e.g. its body was not read).
  static void close_after_response();

 private:
  void install_handlers();
  void accept_loop();
  void serve_connection(int fd);
  bool wait_for_request(int fd, int timeout_s);
  void linger_close(int fd);

  HttpOptions opt_;
  HttpHandler& handler_;
  int port_ = -1;
  std::thread accept_thread_;
  std::atomic<bool> stop_accept_{false};
  std::atomic<bool> closing_{false};
  std::atomic<size_t> open_{0};
  std::mutex conns_mu_;
  std::unordered_set<int> conns_;  // open connection sockets (shutdown() cuts them)
  ElasticPool pool_;
};

}  // namespace tmill::server
