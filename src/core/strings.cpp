#include "core/strings.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace tmill {

Result<uint64_t> parse_size(std::string_view s) {
  std::string str(s);
  if (str.empty()) return Error{"empty size"};
  char* end = nullptr;
  double v = std::strtod(str.c_str(), &end);
  if (end == str.c_str() || !(v >= 0) || !std::isfinite(v)) return Error{fmt::format("invalid size '{}'", s)};
  std::string unit(end);
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double mul = 1;
  if (unit.empty() || unit == "b") mul = 1;
  else if (unit == "k" || unit == "kib") mul = 1024.0;
  else if (unit == "m" || unit == "mib") mul = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib") mul = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib") mul = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb") mul = 1e3;
  else if (unit == "mb") mul = 1e6;
  else if (unit == "gb") mul = 1e9;
  else if (unit == "tb") mul = 1e12;
  else return Error{fmt::format("invalid size unit in '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB)", s)};
  double bytes = v * mul;
  if (bytes > 1.8e19) return Error{fmt::format("size '{}' is too large", s)};
  return static_cast<uint64_t>(bytes);
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.2f} {}", v, units[u]);
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    if (p == std::string_view::npos) {
      out.emplace_back(s.substr(start));
      return out;
    }
    out.emplace_back(s.substr(start, p - start));
    start = p + 1;
  }
}

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; }
    else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; }
    else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3f);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

}  // namespace tmill
