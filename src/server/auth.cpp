#include "server/auth.h"

#include <cstdint>

namespace tmill::server {

bool constant_time_equals(std::string_view a, std::string_view b) {
  // Walk the longer length whatever the contents; out-of-range bytes compare as 0 against a byte
  // that makes the result non-zero anyway through the length term.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile uint8_t diff = static_cast<uint8_t>(a.size() != b.size());
  for (size_t i = 0; i < n; ++i) {
    const uint8_t x = i < a.size() ? static_cast<uint8_t>(a[i]) : 0;
    const uint8_t y = i < b.size() ? static_cast<uint8_t>(b[i]) : 0;
    diff = static_cast<uint8_t>(diff | (x ^ y));
  }
  return diff == 0;
}

std::string_view bearer_token(std::string_view h) {
  while (!h.empty() && (h.front() == ' ' || h.front() == '\t')) h.remove_prefix(1);
  if (h.size() < 7) return {};
  const std::string_view scheme = h.substr(0, 6);
  const char* want = "bearer";
  for (size_t i = 0; i < 6; ++i) {
    const char c = scheme[i] >= 'A' && scheme[i] <= 'Z' ? static_cast<char>(scheme[i] - 'A' + 'a') : scheme[i];
    if (c != want[i]) return {};
  }
  if (h[6] != ' ' && h[6] != '\t') return {};
  h.remove_prefix(7);
  while (!h.empty() && (h.front() == ' ' || h.front() == '\t')) h.remove_prefix(1);
  while (!h.empty() && (h.back() == ' ' || h.back() == '\t')) h.remove_suffix(1);
  return h;
}

bool authorized(const std::vector<std::string>& keys, std::string_view authorization) {
  if (keys.empty()) return true;
  const std::string_view token = bearer_token(authorization);
  bool ok = false;
  for (const std::string& k : keys) ok |= constant_time_equals(token, k);  // no early exit
  return ok && !token.empty();
}

}  // namespace tmill::server
