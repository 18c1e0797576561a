#include "server/rate_limit.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tmill::server {

void KeyLimiter::set_limits(const KeyLimits& l) {
  std::lock_guard<std::mutex> lock(mu_);
  limits_ = l;
}

KeyLimits KeyLimiter::limits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limits_;
}

int64_t KeyLimiter::second_of(Clock::time_point t) const {
  return static_cast<int64_t>(std::floor(std::chrono::duration<double>(t - epoch_).count()));
}

void KeyLimiter::expire(int64_t sec) {
  if (newest_ == INT64_MIN || sec - newest_ >= kWindowSeconds) {
    buckets_.fill(0);
    total_ = 0;
  } else {
    for (int64_t s = newest_ + 1; s <= sec; ++s) {
      int64_t& b = buckets_[static_cast<size_t>(((s % kWindowSeconds) + kWindowSeconds) % kWindowSeconds)];
      total_ -= b;
      b = 0;
    }
  }
  newest_ = std::max(newest_, sec);
}

LimitState KeyLimiter::state(int64_t sec) const {
  LimitState st;
  st.limits = limits_;
  st.remaining_requests = limits_.max_concurrent_requests > 0 ? std::max<int64_t>(0, limits_.max_concurrent_requests - running_) : 0;
  st.remaining_tokens = limits_.tokens_per_minute > 0 ? std::max<int64_t>(0, limits_.tokens_per_minute - total_) : 0;
  // The window is empty once its newest non-empty second has slid out.
  for (int64_t s = sec; s > sec - kWindowSeconds; --s)
    if (buckets_[static_cast<size_t>(((s % kWindowSeconds) + kWindowSeconds) % kWindowSeconds)] != 0) {
      st.reset_tokens_s = static_cast<double>(s + kWindowSeconds - sec);
      break;
    }
  return st;
}

LimitState KeyLimiter::try_acquire(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t sec = second_of(now);
  expire(sec);
  const double frac = std::chrono::duration<double>(now - epoch_).count() - static_cast<double>(sec);
  if (limits_.max_concurrent_requests > 0 && running_ >= limits_.max_concurrent_requests) {
    LimitState st = state(sec);
    st.refused_by = "requests";
    st.retry_after_s = 1;  // a running request ends at an unknown time
    return st;
  }
  if (limits_.tokens_per_minute > 0 && total_ >= limits_.tokens_per_minute) {
    LimitState st = state(sec);
    st.refused_by = "tokens";
    // The oldest seconds leave the window first: wait until enough of them have.
    int64_t left = total_;
    for (int64_t s = sec - kWindowSeconds + 1; s <= sec; ++s) {
      left -= buckets_[static_cast<size_t>(((s % kWindowSeconds) + kWindowSeconds) % kWindowSeconds)];
      if (left < limits_.tokens_per_minute) {
        st.retry_after_s = std::max(0.001, static_cast<double>(s + kWindowSeconds - sec) - frac);
        break;
      }
    }
    return st;
  }
  ++running_;
  LimitState st = state(sec);
  st.admitted = true;
  return st;
}

void KeyLimiter::release() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ > 0) --running_;
}

void KeyLimiter::charge(int64_t tokens, Clock::time_point now) {
  if (tokens <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t sec = second_of(now);
  expire(sec);
  buckets_[static_cast<size_t>(((sec % kWindowSeconds) + kWindowSeconds) % kWindowSeconds)] += tokens;
  total_ += tokens;
}

int64_t KeyLimiter::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

int64_t KeyLimiter::window_tokens(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  expire(second_of(now));
  return total_;
}

LimitState KeyLimiter::peek(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t sec = second_of(now);
  expire(sec);
  return state(sec);
}

std::string format_reset(double seconds) {
  if (seconds <= 0) return "0s";
  if (seconds < 1) return fmt::format("{}ms", static_cast<int64_t>(std::ceil(seconds * 1000)));
  const int64_t s = static_cast<int64_t>(std::ceil(seconds));
  if (s < 60) return fmt::format("{}s", s);
  return fmt::format("{}m{}s", s / 60, s % 60);
}

}  // namespace tmill::server
