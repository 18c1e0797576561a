// API keys on the routes (docs/server.md, "API keys"): who a request is (its bearer token among the
// --api-key keys and the --api-key-file's), whether its role may use the route, its limits
// (concurrency, tokens per minute: 429 with Retry-After), OpenAI's x-ratelimit-* headers, and the
// per-key series of /metrics (labelled with the key's name, never the key).
#include <cmath>

#include <fmt/format.h>

#include "core/log.h"
#include "server/auth.h"
#include "server/server.h"

namespace tmill::server {

std::optional<ApiError> Server::check_key(const HttpRequest& req, const Route& r,
                                          std::shared_ptr<const KeyIdentity>* id) const {
  id->reset();
  if (r.access == Access::Open || !keys_->enabled()) return std::nullopt;
  const std::string* auth = req.header("Authorization");
  const std::string* x_api_key = auth ? nullptr : req.header("x-api-key");  // Anthropic's (and llama-server's) header
  *id = keys_->find(auth ? bearer_token(*auth) : x_api_key ? std::string_view(*x_api_key) : std::string_view());
  ApiError e;
  if (!*id) {
    e.status = 401;
    e.message = auth || x_api_key ? "Incorrect API key provided."
                                  : "Missing API key: send 'Authorization: Bearer <key>' (or 'x-api-key: <key>').";
    e.type = "invalid_request_error";
    e.code = "invalid_api_key";
    return e;
  }
  if (r.access == Access::Admin && keys_->has_file() && (*id)->role != KeyRole::Admin) {
    e.status = 403;
    e.message = fmt::format("The API key '{}' (role user) may not use {}: it needs an admin key.", (*id)->name, r.path);
    e.type = "permission_error";
    e.code = "insufficient_permissions";
    return e;
  }
  return std::nullopt;
}

HttpResponse Server::run_as_key(HttpRequest& req, const Route& r, const KeyIdentity& key) {
  MetricsRegistry& reg = metrics_registry_;
  const std::shared_ptr<KeyLimiter> lim = r.limited ? key.limiter : nullptr;
  Counter* tokens = &reg.counter("tokenmill:api_key_tokens_total",
                                 "Tokens (prompt + completion) of requests per API key (its name).", {{"key", key.name}});
  req.api_key_name = key.name;
  req.api_key_admin = key.role == KeyRole::Admin;
  req.count_tokens = [lim, tokens](int64_t n) {
    tokens->inc(static_cast<double>(n));
    if (lim) lim->charge(n, KeyLimiter::Clock::now());
  };
  LimitState st;
  HttpResponse res;
  if (lim) st = lim->try_acquire(KeyLimiter::Clock::now());
  if (lim && !st.admitted) {
    const bool by_requests = std::string_view(st.refused_by) == "requests";
    reg.counter("tokenmill:api_key_rate_limited_total", "Requests refused (429) by an API key's limits, per key and limit.",
                {{"key", key.name}, {"limit", st.refused_by}})
        .inc();
    ApiError e;
    e.status = 429;
    e.type = "rate_limit_error";
    e.code = "rate_limit_exceeded";
    e.message = by_requests ? fmt::format("Rate limit reached for API key '{}': {} requests running at once "
                                          "(max_concurrent_requests {}). Retry when one has finished.",
                                          key.name, st.limits.max_concurrent_requests,
                                          st.limits.max_concurrent_requests)
                            : fmt::format("Rate limit reached for API key '{}': tokens_per_minute {} used in the last "
                                          "60 s. Retry in {:.1f} s.",
                                          key.name, st.limits.tokens_per_minute, st.retry_after_s);
    res = reply_error(e, "rate_limited");
    res.set_header("Retry-After", std::to_string(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(st.retry_after_s)))));
  } else {
    res = (this->*(r.handler))(req);
    if (lim) {
      if (res.streaming()) {  // the slot is held until the stream is over
        auto prev = std::move(res.on_close);
        res.on_close = [lim, prev = std::move(prev)] {
          if (prev) prev();  // counts the stream's tokens first
          lim->release();
        };
      } else {
        lim->release();
        const LimitState after = lim->peek(KeyLimiter::Clock::now());  // with this request's tokens
        st.remaining_tokens = after.remaining_tokens;
        st.reset_tokens_s = after.reset_tokens_s;
      }
    }
  }
  if (lim) {
    const KeyLimits& l = st.limits;
    if (l.max_concurrent_requests > 0) {
      res.set_header("x-ratelimit-limit-requests", std::to_string(l.max_concurrent_requests));
      res.set_header("x-ratelimit-remaining-requests", std::to_string(st.remaining_requests));
    }
    if (l.tokens_per_minute > 0) {
      res.set_header("x-ratelimit-limit-tokens", std::to_string(l.tokens_per_minute));
      res.set_header("x-ratelimit-remaining-tokens", std::to_string(st.remaining_tokens));
      res.set_header("x-ratelimit-reset-tokens", format_reset(st.reset_tokens_s));
    }
  }
  count_key_request(key.name, res.status);
  return res;
}

void Server::count_key_request(const std::string& name, int status) {
  metrics_registry_
      .counter("tokenmill:api_key_requests_total", "Requests per API key (its name) and HTTP status.",
               {{"key", name}, {"status", std::to_string(status)}})
      .inc();
}

Result<size_t> Server::reload_api_keys() {
  if (!keys_->has_file()) {
    log_info("API keys: no --api-key-file to reload");
    return Error{"no --api-key-file"};
  }
  const size_t before = keys_->size();
  auto n = keys_->reload();
  if (!n.ok()) {
    log_error("API keys: reloading {} failed, keeping the {} key(s) loaded before: {}", keys_->file(), before, n.error());
    return n;
  }
  std::string names;
  for (const auto& x : keys_->names()) names += (names.empty() ? "" : ", ") + x;
  log_info("API keys: reloaded {}: {} key(s) ({})", keys_->file(), *n, names);
  return n;
}

}  // namespace tmill::server
