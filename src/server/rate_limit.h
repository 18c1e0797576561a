// Per-API-key limits (docs/server.md, "API keys"): requests running at once, and tokens per minute
// (prompt + completion) over a sliding 60-second window kept as 60 one-second buckets (bounded
// memory, 1 s resolution). A request is admitted while the key has a free request slot and its
// tokens of the last 60 s are below the limit; its tokens count when they are known (at its end), so
// one request may take the window past the limit and the next ones wait for it to slide.
//
//   KeyLimiter lim;  lim.set_limits({4, 100000});
//   Admission a = lim.try_acquire(now);   // a.admitted, else a.retry_after_s and which limit
//   ...; lim.charge(tokens, now); lim.release();
//
// Thread-safe; the clock is a parameter so tests drive it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace tmill::server {

struct KeyLimits {
  int64_t max_concurrent_requests = 0;  // 0: unlimited
  int64_t tokens_per_minute = 0;        // 0: unlimited
  bool any() const { return max_concurrent_requests > 0 || tokens_per_minute > 0; }
};

// What the x-ratelimit-* headers and a 429 say.
struct LimitState {
  bool admitted = false;
  const char* refused_by = "";    // "requests" or "tokens" when refused
  double retry_after_s = 0;       // when refused: how long until the limit lets a request through
  KeyLimits limits;
  int64_t remaining_requests = 0; // after this request (admitted) or now (refused)
  int64_t remaining_tokens = 0;   // tokens_per_minute - tokens of the window (at least 0)
  double reset_tokens_s = 0;      // until the window holds no tokens (the limit is whole again)
};

class KeyLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kWindowSeconds = 60;

  void set_limits(const KeyLimits& l);
  KeyLimits limits() const;

  // Takes a request slot when both limits allow it.
  LimitState try_acquire(Clock::time_point now);
  void release();
  // Tokens a request used (prompt + completion), counted in the window at `now`.
  void charge(int64_t tokens, Clock::time_point now);

  int64_t running() const;
  int64_t window_tokens(Clock::time_point now);
  // The headers' figures now, without taking a slot.
  LimitState peek(Clock::time_point now);

 private:
  int64_t second_of(Clock::time_point t) const;
  void expire(int64_t sec);  // drops buckets older than the window (under mu_)
  LimitState state(int64_t sec) const;  // under mu_

  mutable std::mutex mu_;
  KeyLimits limits_;
  int64_t running_ = 0;
  std::array<int64_t, kWindowSeconds> buckets_{};  // tokens per second, indexed sec % 60
  int64_t newest_ = INT64_MIN;                        // the second of the newest bucket written
  int64_t total_ = 0;                                 // sum of buckets_
  Clock::time_point epoch_ = Clock::time_point{};
};

// OpenAI's duration format for x-ratelimit-reset-*: "250ms", "12s", "1m30s".
std::string format_reset(double seconds);

}  // namespace tmill::server
