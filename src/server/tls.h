// TLS for the HTTP transport (OpenSSL): the server context built from `--ssl-certfile` /
// `--ssl-keyfile` (and optional client certificates, `--ssl-ca-certs` / `--ssl-cert-reqs`), and
// non-blocking session I/O the epoll loop drives. Defaults: TLS 1.2 and 1.3 only, forward-secret AEAD
// ciphers for 1.2 (OpenSSL's 1.3 suites), no compression, no renegotiation, ALPN "http/1.1".
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <sys/types.h>

#include "core/result.h"

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace tmill::server {

struct TlsOptions {
  std::string certfile;  // PEM certificate chain
  std::string keyfile;   // PEM private key
  std::string ca_certs;  // PEM CAs that sign client certificates (empty: none asked for)
  int cert_reqs = 0;     // Python ssl's values, as vLLM passes them: 0 none, 1 optional, 2 required
  bool enabled() const { return !certfile.empty() || !keyfile.empty(); }
};

class TlsContext {
 public:
  static Result<std::unique_ptr<TlsContext>> create(const TlsOptions& opt);
  ~TlsContext();
  SSL* new_session(int fd);  // server side of a freshly accepted socket (handshake on first I/O)

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

// Non-blocking I/O on a session: >0 bytes, 0 the peer closed, -1 would block (EAGAIN), -2 failed.
ssize_t tls_read(SSL* ssl, char* buf, size_t n);
ssize_t tls_write(SSL* ssl, const char* buf, size_t n);
bool tls_pending(SSL* ssl);  // decrypted bytes buffered inside the session
void tls_close(SSL* ssl);    // sends close_notify (best effort) and frees the session

}  // namespace tmill::server
