#include "server/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace tmill::server {

namespace {

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

int alpn_select(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,
                void*) {
  static const unsigned char h11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* sel = nullptr;
  if (SSL_select_next_proto(&sel, outlen, h11, sizeof h11, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;  // a client without http/1.1 in its list still gets it, unadvertised
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

Result<std::unique_ptr<TlsContext>> TlsContext::create(const TlsOptions& opt) {
  if (opt.certfile.empty()) return Error{"--ssl-keyfile needs --ssl-certfile"};
  if (opt.keyfile.empty()) return Error{"--ssl-certfile needs --ssl-keyfile"};
  if (opt.cert_reqs < 0 || opt.cert_reqs > 2)
    return Error{fmt::format("--ssl-cert-reqs: {} is not 0 (none), 1 (optional) or 2 (required)", opt.cert_reqs)};
  if (opt.cert_reqs > 0 && opt.ca_certs.empty()) return Error{"--ssl-cert-reqs 1 or 2 needs --ssl-ca-certs"};
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx) return Error{"TLS: " + openssl_error()};
  auto self = std::unique_ptr<TlsContext>(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  // TLS 1.2: forward-secret AEAD suites only (TLS 1.3's are all of that kind).
  SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20:!aNULL:!eNULL");
  SSL_CTX_set_alpn_select_cb(ctx, alpn_select, nullptr);
  if (SSL_CTX_use_certificate_chain_file(ctx, opt.certfile.c_str()) != 1)
    return Error{fmt::format("--ssl-certfile {}: {}", opt.certfile, openssl_error())};
  if (SSL_CTX_use_PrivateKey_file(ctx, opt.keyfile.c_str(), SSL_FILETYPE_PEM) != 1)
    return Error{fmt::format("--ssl-keyfile {}: {}", opt.keyfile, openssl_error())};
  if (SSL_CTX_check_private_key(ctx) != 1)
    return Error{fmt::format("--ssl-keyfile {} does not match --ssl-certfile {}", opt.keyfile, opt.certfile)};
  if (!opt.ca_certs.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, opt.ca_certs.c_str(), nullptr) != 1)
      return Error{fmt::format("--ssl-ca-certs {}: {}", opt.ca_certs, openssl_error())};
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(opt.ca_certs.c_str())) SSL_CTX_set_client_CA_list(ctx, names);
    int mode = SSL_VERIFY_NONE;
    if (opt.cert_reqs == 1) mode = SSL_VERIFY_PEER;
    if (opt.cert_reqs == 2) mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx, mode, nullptr);
  }
  return self;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

SSL* TlsContext::new_session(int fd) {
  SSL* ssl = SSL_new(ctx_);
  if (!ssl) return nullptr;
  SSL_set_fd(ssl, fd);
  SSL_set_accept_state(ssl);
  return ssl;
}

namespace {

ssize_t result(SSL* ssl, int r) {
  if (r > 0) return r;
  const int e = SSL_get_error(ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return -1;
  if (e == SSL_ERROR_ZERO_RETURN) return 0;  // close_notify
  if (e == SSL_ERROR_SYSCALL && errno == EINTR) return -1;
  ERR_clear_error();  // a failed handshake (plain HTTP on the TLS port, a bad client certificate)
  return -2;
}

}  // namespace

ssize_t tls_read(SSL* ssl, char* buf, size_t n) { return result(ssl, SSL_read(ssl, buf, static_cast<int>(n))); }

ssize_t tls_write(SSL* ssl, const char* buf, size_t n) {
  if (n == 0) return 0;
  return result(ssl, SSL_write(ssl, buf, static_cast<int>(std::min<size_t>(n, 1u << 30))));
}

bool tls_pending(SSL* ssl) { return SSL_pending(ssl) > 0; }

void tls_close(SSL* ssl) {
  if (!ssl) return;
  if (SSL_is_init_finished(ssl)) SSL_shutdown(ssl);  // non-blocking: one attempt
  ERR_clear_error();
  SSL_free(ssl);
}

}  // namespace tmill::server
