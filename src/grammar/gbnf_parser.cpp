// GBNF parser. The format (llama.cpp grammars/README.md):
//   name ::= alternatives        (a rule; names are [A-Za-z0-9_-]+, the start rule is "root")
//   a b | c                      (sequence, alternation), ( ... ) groups, x* x+ x? x{m} x{m,} x{m,n} x{,n}
//   "literal" [a-z] [^...] .     (escapes \n \t \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH; code points)
//   # comment to end of line
// A rule's alternatives may continue on following lines: a rule ends where the next `name ::=` starts
// (llama.cpp needs `|` lines inside parentheses; accepting more is harmless).
#include "grammar/gbnf_parser.h"
#include "grammar/gbnf_text.h"

#include <algorithm>
#include <unordered_map>

namespace tmill::grammar::gbnf {

namespace {

constexpr uint32_t kMaxCp = 0x10FFFF;

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<Syntax> run() {
    skip_space(true);
    while (!at_end()) {
      if (!is_name_char(peek())) return fail("expected a rule name");
      int line = line_, col = col_;
      std::string name = parse_name();
      skip_space(false);
      if (!s_.substr(pos_).starts_with("::=")) return fail("expected '::=' after rule name '" + name + "'");
      advance(3);
      skip_space(true);
      int32_t id = rule_id(name, line, col);
      Rule& r = syn_.rules[static_cast<size_t>(id)];
      if (r.defined) return fail_at(line, col, "rule '" + name + "' is defined twice");
      auto body = parse_alternates(false);
      if (!body.ok()) return body.error_value();
      Rule& r2 = syn_.rules[static_cast<size_t>(id)];
      r2.defined = true;
      r2.line = line;
      r2.col = col;
      r2.body = std::move(body.value());
      skip_space(true);
    }
    for (const Rule& r : syn_.rules) {
      if (!r.defined) return fail_at(r.line, r.col, "undefined rule '" + r.name + "'");
    }
    return std::move(syn_);
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
  Syntax syn_;
  std::unordered_map<std::string, int32_t> ids_;
  int depth_ = 0;

  bool at_end() const { return pos_ >= s_.size(); }
  char peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }
  void advance(size_t n = 1) {
    for (size_t i = 0; i < n && pos_ < s_.size(); ++i, ++pos_) {
      if (s_[pos_] == '\n') {
        ++line_;
        col_ = 1;
      } else if ((static_cast<unsigned char>(s_[pos_]) & 0xC0) != 0x80) {
        ++col_;  // columns count code points
      }
    }
  }
  static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }
  Error fail(const std::string& msg) const { return fail_at(line_, col_, msg); }
  static Error fail_at(int line, int col, const std::string& msg) {
    return Error{"grammar: " + std::to_string(line) + ":" + std::to_string(col) + ": " + msg};
  }

  std::string parse_name() {
    size_t b = pos_;
    while (!at_end() && is_name_char(peek())) advance();
    return std::string(s_.substr(b, pos_ - b));
  }
  int32_t rule_id(const std::string& name, int line, int col) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    auto id = static_cast<int32_t>(syn_.rules.size());
    ids_.emplace(name, id);
    Rule r;
    r.name = name;
    r.line = line;
    r.col = col;
    syn_.rules.push_back(std::move(r));
    return id;
  }

  // Spaces, tabs, comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (!at_end()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        advance();
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') advance();
      } else {
        break;
      }
    }
  }

  // At a newline outside parentheses: does the rule go on (the next line does not start a new rule)?
  bool continues_after_newline() {
    size_t save = pos_;
    int sl = line_, sc = col_;
    skip_space(true);
    bool cont = !at_end();
    if (cont && is_name_char(peek())) {
      size_t p = pos_;
      while (p < s_.size() && is_name_char(s_[p])) ++p;
      while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
      if (s_.substr(p).starts_with("::=")) cont = false;
    }
    pos_ = save;
    line_ = sl;
    col_ = sc;
    return cont;
  }

  // Skips spaces between elements; inside parentheses newlines are spaces too. At top level a newline
  // ends the rule unless the next line continues it.
  void skip_inner(bool nested) {
    for (;;) {
      skip_space(nested);
      if (!nested && peek() == '\n' && continues_after_newline()) {
        skip_space(true);
        continue;
      }
      return;
    }
  }

  Result<Expr> parse_alternates(bool nested) {
    if (++depth_ > 200) return fail("grammar nests too deeply");
    Expr alt;
    alt.kind = Expr::Kind::Alt;
    for (;;) {
      auto seq = parse_sequence(nested);
      if (!seq.ok()) return seq;
      alt.kids.push_back(std::move(seq.value()));
      if (peek() != '|') break;
      advance();
      skip_inner(true);
    }
    --depth_;
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Result<Expr> parse_sequence(bool nested) {
    Expr seq;
    seq.kind = Expr::Kind::Seq;
    skip_inner(nested);
    while (!at_end()) {
      char c = peek();
      int line = line_, col = col_;
      Expr e;
      if (c == '"') {
        advance();
        e.kind = Expr::Kind::Literal;
        while (!at_end() && peek() != '"') {
          if (peek() == '\n') return fail("unterminated string literal");
          auto cp = parse_char();
          if (!cp.ok()) return cp.error_value();
          e.text += detail::utf8(cp.value());
        }
        if (at_end()) return fail_at(line, col, "unterminated string literal");
        advance();
      } else if (c == '[') {
        advance();
        auto cls = parse_class(line, col);
        if (!cls.ok()) return cls.error_value();
        e = std::move(cls.value());
      } else if (c == '.') {
        advance();
        e.kind = Expr::Kind::Class;
        e.ranges = normalize({{0, kMaxCp}});
      } else if (c == '(') {
        advance();
        skip_inner(true);
        auto inner = parse_alternates(true);
        if (!inner.ok()) return inner;
        if (peek() != ')') return fail_at(line, col, "expected ')' to close this group");
        advance();
        e = std::move(inner.value());
      } else if (is_name_char(c)) {
        std::string name = parse_name();
        size_t p = pos_;
        while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
        if (s_.substr(p).starts_with("::=")) {
          return fail_at(line, col, "expected a newline before the definition of rule '" + name + "'");
        }
        e.kind = Expr::Kind::Ref;
        e.rule = rule_id(name, line, col);
      } else if (c == '<') {
        return fail("token references (<...>) are not supported");
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        return fail(std::string("'") + c + "' must follow an element");
      } else {
        break;  // '|', ')', newline at top level, or an error the caller reports
      }
      skip_inner(nested);
      // Postfix repetition operators, possibly several (x*? is legal if odd).
      for (;;) {
        char op = peek();
        if (op == '*' || op == '+' || op == '?') {
          advance();
          e = repeat(std::move(e), op == '+' ? 1 : 0, op == '?' ? 1 : -1);
        } else if (op == '{') {
          int ol = line_, oc = col_;
          advance();
          skip_space(true);
          int64_t lo = 0, hi = -1;
          bool have_lo = false;
          if (auto n = parse_int(); n >= 0) {
            lo = n;
            have_lo = true;
          } else if (n == -2) {
            return fail_at(ol, oc, "repetition count too large (at most " + std::to_string(kMaxRepeat) + ")");
          }
          skip_space(true);
          if (peek() == ',') {
            advance();
            skip_space(true);
            auto n = parse_int();
            if (n == -2) return fail_at(ol, oc, "repetition count too large (at most " + std::to_string(kMaxRepeat) + ")");
            hi = n;  // -1: unbounded
            skip_space(true);
          } else {
            if (!have_lo) return fail_at(ol, oc, "expected a number in '{...}'");
            hi = lo;
          }
          if (peek() != '}') return fail_at(ol, oc, "expected '}' to close the repetition");
          advance();
          if (hi >= 0 && hi < lo) return fail_at(ol, oc, "repetition {m,n} with n < m");
          e = repeat(std::move(e), static_cast<int32_t>(lo), static_cast<int32_t>(hi));
        } else {
          break;
        }
        skip_inner(nested);
      }
      (void)line;
      seq.kids.push_back(std::move(e));
    }
    if (!at_end()) {
      char c = peek();
      bool ok_end = c == '|' || (nested && c == ')') || (!nested && c == '\n');
      if (!ok_end) {
        if (c == ')') return fail("unexpected ')'");
        return fail(std::string("unexpected character '") + c + "'");
      }
    }
    if (seq.kids.size() == 1) return std::move(seq.kids[0]);
    return seq;
  }

  static Expr repeat(Expr e, int32_t lo, int32_t hi) {
    Expr r;
    r.kind = Expr::Kind::Repeat;
    r.min = lo;
    r.max = hi;
    r.kids.push_back(std::move(e));
    return r;
  }

  // A decimal integer; -1 when none, -2 when larger than kMaxRepeat.
  int64_t parse_int() {
    if (!(peek() >= '0' && peek() <= '9')) return -1;
    int64_t v = 0;
    bool big = false;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepeat) big = true, v = kMaxRepeat;
      advance();
    }
    return big ? -2 : v;
  }

  Result<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      char c = peek();
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else return fail("expected " + std::to_string(digits) + " hex digits in escape");
      v = v * 16 + static_cast<uint32_t>(d);
      advance();
    }
    return v;
  }

  // One character of a literal or class: an escape or a UTF-8 encoded code point.
  Result<uint32_t> parse_char() {
    int line = line_, col = col_;
    auto c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      advance();
      if (at_end()) return fail("unterminated escape");
      char e = peek();
      advance();
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 't': return uint32_t{'\t'};
        case 'r': return uint32_t{'\r'};
        case '0': return uint32_t{0};
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': case '\'':
          return static_cast<uint32_t>(e);
        case 'x': return parse_hex(2);
        case 'u': {
          auto v = parse_hex(4);
          if (v.ok() && v.value() >= 0xD800 && v.value() <= 0xDFFF) return fail_at(line, col, "surrogate code point in \\u escape");
          return v;
        }
        case 'U': {
          auto v = parse_hex(8);
          if (!v.ok()) return v;
          if (v.value() > kMaxCp || (v.value() >= 0xD800 && v.value() <= 0xDFFF)) {
            return fail_at(line, col, "code point out of range in \\U escape");
          }
          return v;
        }
        default: return fail_at(line, col, std::string("unknown escape '\\") + e + "'");
      }
    }
    // UTF-8 decode.
    int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > s_.size()) return fail("invalid UTF-8 in grammar");
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; ++i) {
      auto b = static_cast<unsigned char>(s_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) return fail("invalid UTF-8 in grammar");
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > kMaxCp || (cp >= 0xD800 && cp <= 0xDFFF)) return fail("invalid UTF-8 in grammar");
    advance(static_cast<size_t>(n));
    return cp;
  }

  Result<Expr> parse_class(int line, int col) {
    Expr e;
    e.kind = Expr::Kind::Class;
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      advance();
    }
    std::vector<CpRange> ranges;
    while (!at_end() && peek() != ']') {
      if (peek() == '\n') return fail_at(line, col, "unterminated character class");
      auto lo = parse_char();
      if (!lo.ok()) return lo.error_value();
      uint32_t hi = lo.value();
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < s_.size()) {
        advance();
        auto h = parse_char();
        if (!h.ok()) return h.error_value();
        hi = h.value();
        if (hi < lo.value()) return fail_at(line, col, "character class range is reversed");
      }
      ranges.emplace_back(lo.value(), hi);
    }
    if (at_end()) return fail_at(line, col, "unterminated character class");
    advance();
    e.ranges = negated ? complement(std::move(ranges)) : normalize(std::move(ranges));
    return e;
  }
};

}  // namespace

std::vector<CpRange> normalize(std::vector<CpRange> r) {
  std::vector<CpRange> cut;
  for (auto [lo, hi] : r) {  // drop surrogates: UTF-8 cannot encode them
    if (hi > kMaxCp) hi = kMaxCp;
    if (lo > hi) continue;
    if (lo < 0xD800 && hi > 0xDFFF) {
      cut.emplace_back(lo, 0xD7FF);
      cut.emplace_back(0xE000, hi);
    } else if (lo >= 0xD800 && hi <= 0xDFFF) {
      continue;
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      cut.emplace_back(0xE000, hi);
    } else if (hi >= 0xD800 && hi <= 0xDFFF) {
      cut.emplace_back(lo, 0xD7FF);
    } else {
      cut.emplace_back(lo, hi);
    }
  }
  std::sort(cut.begin(), cut.end());
  std::vector<CpRange> out;
  for (auto [lo, hi] : cut) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

std::vector<CpRange> complement(std::vector<CpRange> ranges) {
  auto r = normalize(std::move(ranges));
  std::vector<CpRange> out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCp) out.emplace_back(next, kMaxCp);
  return normalize(std::move(out));
}

namespace {
void hash_tree(Expr& e) {
  Hash128 h;
  h.mix(static_cast<uint64_t>(e.kind) + 1);
  switch (e.kind) {
    case Expr::Kind::Literal:
      h.mix(e.text.size());
      for (char c : e.text) h.mix(static_cast<uint8_t>(c));
      break;
    case Expr::Kind::Class:
      h.mix(e.ranges.size());
      for (auto [lo, hi] : e.ranges) h.mix((uint64_t{lo} << 32) | hi);
      break;
    case Expr::Kind::Ref:
      h.mix(static_cast<uint32_t>(e.rule));
      break;
    case Expr::Kind::Repeat:
      h.mix((uint64_t{static_cast<uint32_t>(e.min)} << 32) | static_cast<uint32_t>(e.max));
      break;
    default:
      break;
  }
  h.mix(e.kids.size());
  for (Expr& k : e.kids) {
    hash_tree(k);
    h.mix(k.hash.a);
    h.mix(k.hash.b);
  }
  e.hash = h;
}
}  // namespace

Result<Syntax> parse(std::string_view text) {
  TM_ASSIGN_OR_RETURN(Syntax syn, Parser(text).run());
  for (Rule& r : syn.rules) hash_tree(r.body);
  return syn;
}

}  // namespace tmill::grammar::gbnf
