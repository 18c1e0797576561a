#include "grammar/gbnf_text.h"

#include <algorithm>
#include <cstdio>

#include "grammar/json_schema.h"

namespace tmill::grammar::detail {

void CpSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  r_.emplace_back(lo, hi);
  std::sort(r_.begin(), r_.end());
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (auto& [a, b] : r_) {
    if (!out.empty() && a <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.emplace_back(a, b);
    }
  }
  r_ = std::move(out);
}

void CpSet::add(const CpSet& o) {
  for (auto& [a, b] : o.r_) add(a, b);
}

CpSet CpSet::negated() const {
  CpSet s;
  uint32_t next = 0;
  for (auto& [a, b] : r_) {
    if (a > next) s.r_.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= kMaxCp) s.r_.emplace_back(next, kMaxCp);
  return s;
}

CpSet CpSet::intersect(const CpSet& o) const {
  CpSet s;
  for (auto& [a, b] : r_) {
    for (auto& [c, d] : o.r_) {
      uint32_t lo = std::max(a, c), hi = std::min(b, d);
      if (lo <= hi) s.r_.emplace_back(lo, hi);
    }
  }
  std::sort(s.r_.begin(), s.r_.end());
  return s;
}

CpSet CpSet::minus(const CpSet& o) const { return intersect(o.negated()); }

bool CpSet::contains(uint32_t cp) const {
  for (auto& [a, b] : r_) {
    if (cp >= a && cp <= b) return true;
  }
  return false;
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

uint32_t next_cp(std::string_view s, size_t& i) {
  auto b = static_cast<unsigned char>(s[i]);
  int n = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
  if (n <= 0 || i + n >= s.size()) {
    ++i;
    return b;
  }
  uint32_t cp = b & (0x3F >> n);
  for (int k = 1; k <= n; ++k) {
    auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 2) {
      ++i;
      return b;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
  static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return b;
  }
  i += n + 1;
  return cp;
}

namespace {

// One code point inside a GBNF literal or class. `special` are the characters that need "\\".
std::string gbnf_cp(uint32_t cp, std::string_view special) {
  char buf[16];
  if (cp == '\n') return "\\n";
  if (cp == '\r') return "\\r";
  if (cp == '\t') return "\\t";
  if (cp < 0x20 || cp == 0x7F) {
    std::snprintf(buf, sizeof buf, "\\x%02X", cp);
    return buf;
  }
  if (cp < 0x80) {
    if (special.find(char(cp)) != std::string_view::npos) return std::string("\\") + char(cp);
    return std::string(1, char(cp));
  }
  if (cp < 0x10000) {
    std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  }
  return buf;
}

}  // namespace

std::string gbnf_class(const CpSet& s) {
  std::string out = "[";
  for (auto& [a, b] : s.ranges()) {
    out += gbnf_cp(a, "]\\^-[");
    if (b != a) {
      if (b > a + 1) out += '-';
      out += gbnf_cp(b, "]\\^-[");
    }
  }
  return out + "]";
}

std::string literal(std::string_view bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += char(c);  // UTF-8 bytes pass through: literals are byte strings
    }
  }
  return out + "\"";
}

std::string json_escape_cp(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: break;
  }
  if (cp < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    return buf;
  }
  return utf8(cp);
}

std::string json_escape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) out += json_escape_cp(next_cp(text, i));
  return out;
}

std::string json_char_expr(const CpSet& s) {
  static const CpSet kRaw = [] {
    CpSet r = CpSet::range(0x20, kMaxCp);
    r = r.minus(CpSet::range('"', '"')).minus(CpSet::range('\\', '\\')).minus(CpSet::range(0xD800, 0xDFFF));
    return r;
  }();
  std::vector<std::string> alts;
  CpSet raw = s.intersect(kRaw);
  if (!raw.empty()) {
    alts.push_back(raw.single() ? literal(utf8(raw.first())) : gbnf_class(raw));
  }
  // Escaped characters: the short escapes one by one, the \u00xx controls as classes of hex digits.
  std::string short_esc;
  for (uint32_t c : {uint32_t('"'), uint32_t('\\'), uint32_t('b'), uint32_t('f'), uint32_t('n'), uint32_t('r'),
                     uint32_t('t')}) {
    uint32_t cp = c == 'b' ? 8 : c == 'f' ? 12 : c == 'n' ? 10 : c == 'r' ? 13 : c == 't' ? 9 : c;
    if (s.contains(cp)) short_esc += char(c);
  }
  std::vector<std::string> u_alts;
  for (int hi = 0; hi <= 1; ++hi) {
    CpSet lows;
    for (uint32_t lo = 0; lo < 16; ++lo) {
      uint32_t cp = uint32_t(hi) * 16 + lo;
      if (cp == 8 || cp == 9 || cp == 10 || cp == 12 || cp == 13) continue;
      if (s.contains(cp)) lows.add(lo < 10 ? '0' + lo : 'a' + lo - 10, lo < 10 ? '0' + lo : 'a' + lo - 10);
    }
    if (!lows.empty()) u_alts.push_back(std::string(hi ? "\"1\" " : "\"0\" ") + gbnf_class(lows));
  }
  std::vector<std::string> esc;
  if (short_esc.size() == 1) {
    esc.push_back(literal(std::string(1, short_esc[0])));
  } else if (!short_esc.empty()) {
    CpSet cs;
    for (char c : short_esc) cs.add(uint32_t(c), uint32_t(c));
    esc.push_back(gbnf_class(cs));
  }
  if (!u_alts.empty()) {
    std::string u = "\"u00\" ";
    if (u_alts.size() == 1) {
      u += u_alts[0];
    } else {
      u += "( " + u_alts[0] + " | " + u_alts[1] + " )";
    }
    esc.push_back(u);
  }
  if (!esc.empty()) {
    std::string e = "\"\\\\\" ";
    if (esc.size() == 1) {
      e += group(esc[0]);
    } else {
      e += "( " + esc[0] + " | " + esc[1] + " )";
    }
    alts.push_back(e);
  }
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string out = "( ";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + " )";
}

std::string RuleSet::fresh(std::string_view hint) {
  std::string base;
  for (char c : hint) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      base += c;
    } else if (c >= 'A' && c <= 'Z') {
      base += char(c - 'A' + 'a');
    } else if (!base.empty() && base.back() != '-') {
      base += '-';
    }
    if (base.size() >= 40) break;
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base = "r";
  if (base == "root") base = "root-";
  std::string name = base;
  int& n = counters_[base];
  while (index_.count(name)) name = base + "-" + std::to_string(++n);
  index_[name] = rules_.size();
  rules_.emplace_back(name, std::string());
  return name;
}

std::string RuleSet::add(std::string_view hint, const std::string& body) {
  auto it = by_body_.find(body);
  if (it != by_body_.end()) return it->second;
  std::string name = fresh(hint);
  rules_[index_[name]].second = body;
  by_body_[body] = name;
  return name;
}

std::string RuleSet::reserve(std::string_view hint) { return fresh(hint); }

void RuleSet::define(const std::string& name, std::string body) { rules_[index_.at(name)].second = std::move(body); }

void RuleSet::discard(const std::string& name) { rules_[index_.at(name)].second.clear(); }

std::string RuleSet::render(const std::string& root_body) const {
  std::string out = "root ::= " + root_body + "\n";
  for (auto& [name, body] : rules_) {
    if (!body.empty()) out += name + " ::= " + body + "\n";
  }
  return out;
}

namespace {
// Scans one primary (literal, class, group, rule name) starting at i; returns the index after it.
size_t skip_primary(std::string_view e, size_t i) {
  char c = e[i];
  if (c == '"' || c == '[') {
    char close = c == '"' ? '"' : ']';
    ++i;
    while (i < e.size() && e[i] != close) i += e[i] == '\\' ? 2 : 1;
    return i + 1;
  }
  if (c == '(') {
    int depth = 0;
    for (; i < e.size(); ++i) {
      if (e[i] == '"' || e[i] == '[') {
        i = skip_primary(e, i) - 1;
        continue;
      }
      if (e[i] == '(') ++depth;
      if (e[i] == ')' && --depth == 0) return i + 1;
    }
    return i;
  }
  while (i < e.size() && e[i] != ' ' && e[i] != '|' && e[i] != ')' && e[i] != '*' && e[i] != '+' && e[i] != '?' &&
         e[i] != '{')
    ++i;
  return i;
}
}  // namespace

bool needs_group(std::string_view e) {
  size_t b = e.find_first_not_of(' ');
  if (b == std::string_view::npos) return true;
  size_t end = skip_primary(e, b);
  return e.find_first_not_of(' ', end) != std::string_view::npos;
}

std::string group(const std::string& expr) { return needs_group(expr) ? "( " + expr + " )" : expr; }

}  // namespace tmill::grammar::detail
