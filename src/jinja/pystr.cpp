#include "jinja/pystr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tmill::jinja::py {

uint32_t next_cp(std::string_view s, size_t& pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  unsigned char c = p[pos];
  int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || pos + len > n) {
    pos += 1;
    return 0xFFFD;
  }
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < len; ++k) {
    unsigned char cc = p[pos + k];
    if ((cc & 0xC0) != 0x80) {
      pos += 1;
      return 0xFFFD;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  pos += len;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;  // lone surrogates can't be UTF-8
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) out += static_cast<char32_t>(next_cp(s, pos));
  return out;
}

std::string encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

size_t cp_len(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) next_cp(s, pos);
  return n;
}

size_t byte_offset(std::string_view s, size_t cp_index) {
  size_t pos = 0;
  for (size_t k = 0; k < cp_index && pos < s.size(); ++k) next_cp(s, pos);
  return pos;
}

size_t cp_index(std::string_view s, size_t byte_pos) {
  size_t n = 0;
  for (size_t pos = 0; pos < byte_pos && pos < s.size(); ++n) next_cp(s, pos);
  return n;
}

bool is_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Simple one-to-one case pairs for the scripts chat text commonly uses.
uint32_t to_upper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F) {
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
    if (c == 0x131) return 'I';
    if (c == 0x130 || c == 0x138 || c == 0x149 || c == 0x178 || c == 0x17F) return c;
    return (c % 2 == 1) ? c - 1 : c;
  }
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
  return c;
}

uint32_t to_lower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
    if (c == 0x130) return 'i';
    if (c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F) return c;
    return (c % 2 == 0) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return c;
}

bool is_upper(uint32_t c) { return to_lower(c) != c || (c >= 'A' && c <= 'Z'); }
bool is_lower(uint32_t c) { return to_upper(c) != c || c == 0xDF || c == 0x138 || c == 0x149; }
static bool is_cased(uint32_t c) { return is_upper(c) || is_lower(c); }

bool is_alpha(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (is_cased(c)) return true;
  return c == 0xAA || c == 0xBA || (c >= 0x3040 && c <= 0x30FF && c != 0x30FB) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0x0600 && c <= 0x064A) ||
         (c >= 0x05D0 && c <= 0x05EA) || (c >= 0x0E01 && c <= 0x0E30);
}

bool is_digit(uint32_t c) { return (c >= '0' && c <= '9') || (c >= 0xFF10 && c <= 0xFF19); }

template <class F>
static std::string map_cps(std::string_view s, F f) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) append_utf8(out, f(next_cp(s, pos)));
  return out;
}

// Full (multi-character) uppercase mapping where Python has one that chat text meets: U+00DF -> "SS".
static void append_upper(std::string& out, uint32_t c, bool title) {
  if (c == 0xDF) out += title ? "Ss" : "SS";
  else append_utf8(out, to_upper(c));
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) append_upper(out, next_cp(s, pos), false);
  return out;
}
std::string lower(std::string_view s) { return map_cps(s, to_lower); }
std::string swapcase(std::string_view s) {
  return map_cps(s, [](uint32_t c) { return is_upper(c) ? to_lower(c) : to_upper(c); });
}

std::string capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool first = true;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t c = next_cp(s, pos);
    if (first) append_upper(out, c, true);
    else append_utf8(out, to_lower(c));
    first = false;
  }
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t c = next_cp(s, pos);
    if (prev_cased) append_utf8(out, to_lower(c));
    else append_upper(out, c, true);
    prev_cased = is_cased(c);
  }
  return out;
}

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::u32string set;
  if (chars) set = decode(*chars);
  auto strippable = [&](uint32_t c) { return chars ? set.find(static_cast<char32_t>(c)) != std::u32string::npos : is_space(c); };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t p = b;
      if (!strippable(next_cp(s, p))) break;
      b = p;
    }
  }
  if (right) {
    while (e > b) {
      size_t start = e - 1;
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t p = start;
      if (!strippable(next_cp(s, p))) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        size_t f = s.find(*sep, pos);
        if (f == std::string_view::npos) break;
        out.emplace_back(s.substr(pos, f - pos));
        pos = f + sep->size();
      }
      out.emplace_back(s.substr(pos));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
        if (end < sep->size()) break;
        size_t f = s.rfind(*sep, end - sep->size());
        if (f == std::string_view::npos) break;
        rev.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
        end = f;
      }
      rev.emplace_back(s.substr(0, end));
      out.assign(rev.rbegin(), rev.rend());
    }
    return out;
  }
  // Whitespace splitting on code points.
  std::u32string u = decode(s);
  if (!from_right) {
    size_t i = 0, n = u.size();
    while (true) {
      while (i < n && is_space(u[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(encode(u.substr(i)));
        break;
      }
      size_t j = i;
      while (j < n && !is_space(u[j])) ++j;
      out.push_back(encode(u.substr(i, j - i)));
      i = j;
    }
  } else {
    std::vector<std::string> rev;
    size_t e = u.size();
    while (true) {
      while (e > 0 && is_space(u[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) >= maxsplit) {
        rev.push_back(encode(u.substr(0, e)));
        break;
      }
      size_t b = e;
      while (b > 0 && !is_space(u[b - 1])) --b;
      rev.push_back(encode(u.substr(b, e - b)));
      e = b;
    }
    out.assign(rev.rbegin(), rev.rend());
  }
  return out;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0, pos = 0;
  while (pos < s.size()) {
    size_t cp_start = pos;
    uint32_t c = next_cp(s, pos);
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
               c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    if (c == '\r' && pos < s.size() && s[pos] == '\n') ++pos;
    out.emplace_back(s.substr(start, (keepends ? pos : cp_start) - start));
    start = pos;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts repl between every code point (and at both ends)
    int64_t done = 0;
    size_t pos = 0;
    while (true) {
      if (count >= 0 && done >= count) {
        out.append(s.substr(pos));
        break;
      }
      out.append(repl);
      ++done;
      if (pos >= s.size()) break;
      size_t p = pos;
      next_cp(s, p);
      out.append(s.substr(pos, p - pos));
      pos = p;
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(old, pos);
    if (f == std::string_view::npos) break;
    out.append(s.substr(pos, f - pos));
    out.append(repl);
    pos = f + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

size_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return cp_len(s) + 1;
  size_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

static bool printable(uint32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c >= 0x80 && c <= 0xA0) return false;
  if (c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x2064) || c == 0x3000 || c == 0xFEFF || (c >= 0xD800 && c <= 0xDFFF) ||
      (c >= 0xE000 && c <= 0xF8FF) || c == 0xFFFE || c == 0xFFFF)
    return false;
  return true;
}

std::string repr_str(std::string_view s) {
  bool has_sq = s.find('\'') != std::string_view::npos, has_dq = s.find('"') != std::string_view::npos;
  char q = (has_sq && !has_dq) ? '"' : '\'';
  std::string out(1, q);
  for (size_t pos = 0; pos < s.size();) {
    uint32_t c = next_cp(s, pos);
    if (c == static_cast<uint32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      char buf[16];
      if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", c);
      else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", c);
      else std::snprintf(buf, sizeof buf, "\\U%08x", c);
      out += buf;
    } else {
      append_utf8(out, c);
    }
  }
  out += q;
  return out;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci = [-]D[.DDDD]e[+-]XX
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  int exp = std::atoi(sci.c_str() + epos + 1);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out += digits.substr(1);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
  } else if (exp < 0) {
    out += "0.";
    out.append(static_cast<size_t>(-exp - 1), '0');
    out += digits;
  } else {
    size_t int_digits = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_digits) {
      out += digits;
      out.append(int_digits - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, int_digits);
      out += '.';
      out += digits.substr(int_digits);
    }
  }
  return out;
}

}  // namespace tmill::jinja::py
