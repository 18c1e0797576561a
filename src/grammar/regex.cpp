// Regex -> GBNF: a recursive-descent parser to a small AST (sets of code points, sequences,
// alternations, bounded repetition, anchors), then one GBNF expression. In JSON-string mode each
// code point is matched by its canonical JSON spelling (gbnf_text.h), so "pattern" constrains the
// decoded string, not its escaped text.
#include "grammar/regex.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "grammar/gbnf_text.h"
#include "grammar/json_schema.h"

namespace tmill::grammar::detail {
namespace {

constexpr uint32_t kInf = UINT32_MAX;

struct Node {
  enum Kind { Set, Seq, Alt, Repeat, Start, End } kind = Seq;
  CpSet set;
  std::vector<Node> kids;
  uint32_t min = 0, max = 0;
  bool any = false;  // Set: any character (emitted as the caller's any-rule)
};

CpSet digit_set() { return CpSet::range('0', '9'); }
CpSet word_set() {
  CpSet s = CpSet::range('0', '9');
  s.add('A', 'Z');
  s.add('a', 'z');
  s.add('_', '_');
  return s;
}
// Whitespace both ECMAScript's \s and Python's \s match (their intersection: never too loose).
CpSet space_set() {
  CpSet s = CpSet::range('\t', '\r');
  s.add(' ', ' ');
  s.add(0xA0, 0xA0);
  s.add(0x1680, 0x1680);
  s.add(0x2000, 0x200A);
  s.add(0x2028, 0x2029);
  s.add(0x202F, 0x202F);
  s.add(0x205F, 0x205F);
  s.add(0x3000, 0x3000);
  return s;
}
// Validators disagree on \d \w \s (ECMAScript: ASCII; Python and Rust: Unicode). Each escape has a
// small set (in every flavour's) and a big one (containing every flavour's); a pattern uses the
// small side, and negations (\D, [^...]) the complement of the big side: never looser than any.
struct SetPair {
  CpSet small, big;
  static SetPair same(CpSet s) { return {s, s}; }
  SetPair negated() const { return {big.negated(), small.negated()}; }
};
CpSet non_ascii() { return CpSet::range(0x80, kMaxCp); }
SetPair digit_pair() {
  CpSet big = digit_set();
  big.add(non_ascii());
  return {digit_set(), big};
}
SetPair word_pair() {
  CpSet big = word_set();
  big.add(non_ascii());
  return {word_set(), big};
}
SetPair space_pair() {
  CpSet big = space_set();
  big.add(0x1C, 0x1F);
  big.add(0x85, 0x85);
  big.add(0xFEFF, 0xFEFF);
  return {space_set(), big};
}

CpSet dot_set() {  // ECMAScript '.': anything but line terminators
  CpSet s = CpSet::any();
  s = s.minus(CpSet::range('\n', '\n')).minus(CpSet::range('\r', '\r')).minus(CpSet::range(0x2028, 0x2029));
  return s;
}

class Parser {
 public:
  explicit Parser(std::string_view pattern) : src_(pattern) {
    for (size_t i = 0; i < pattern.size();) {
      offs_.push_back(i);
      cps_.push_back(next_cp(pattern, i));
    }
    offs_.push_back(pattern.size());
  }

  Result<Node> parse() {
    TM_ASSIGN_OR_RETURN(Node n, parse_alt(0));
    if (i_ < cps_.size()) return err("unmatched ')'");
    return n;
  }

 private:
  Error err(std::string_view what) const {
    return Error{"pattern /" + std::string(src_) + "/: " + std::string(what) + " at offset " +
                 std::to_string(offs_[std::min(i_, cps_.size())]) + " (not supported)"};
  }
  bool at_end() const { return i_ >= cps_.size(); }
  uint32_t peek(size_t k = 0) const { return i_ + k < cps_.size() ? cps_[i_ + k] : 0xFFFFFFFF; }

  Result<Node> parse_alt(int depth) {
    if (depth > 200) return err("nesting too deep");
    Node alt;
    alt.kind = Node::Alt;
    while (true) {
      TM_ASSIGN_OR_RETURN(Node s, parse_seq(depth));
      alt.kids.push_back(std::move(s));
      if (peek() != '|') break;
      ++i_;
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Result<Node> parse_seq(int depth) {
    Node seq;
    seq.kind = Node::Seq;
    while (!at_end() && peek() != '|' && peek() != ')') {
      TM_ASSIGN_OR_RETURN(Node atom, parse_atom(depth));
      uint32_t mn = 0, mx = 0;
      if (parse_quantifier(mn, mx)) {
        if (atom.kind == Node::Start || atom.kind == Node::End) return err("quantified anchor");
        if (peek() == '?') {
          ++i_;  // lazy: same language
        } else if (peek() == '+') {
          return err("possessive quantifier");
        }
        uint32_t a = 0, b = 0;
        size_t save = i_;
        if (parse_quantifier(a, b)) {
          i_ = save;
          return err("nothing to repeat");
        }
        if (mx != kInf && mn > mx) return err("quantifier {m,n} with m > n");
        Node r;
        r.kind = Node::Repeat;
        r.min = mn;
        r.max = mx;
        r.kids.push_back(std::move(atom));
        seq.kids.push_back(std::move(r));
      } else {
        seq.kids.push_back(std::move(atom));
      }
    }
    return seq;
  }

  // Reads ?, *, +, {n}, {n,}, {n,m} at the cursor. A '{' that is no quantifier is left alone.
  bool parse_quantifier(uint32_t& mn, uint32_t& mx) {
    uint32_t c = peek();
    if (c == '*') { ++i_; mn = 0; mx = kInf; return true; }
    if (c == '+') { ++i_; mn = 1; mx = kInf; return true; }
    if (c == '?') { ++i_; mn = 0; mx = 1; return true; }
    if (c != '{') return false;
    size_t j = i_ + 1;
    auto num = [&](uint32_t& v) {
      size_t start = j;
      uint64_t x = 0;
      while (j < cps_.size() && cps_[j] >= '0' && cps_[j] <= '9') {
        x = std::min<uint64_t>(x * 10 + (cps_[j] - '0'), 1u << 30);
        ++j;
      }
      v = uint32_t(x);
      return j > start;
    };
    uint32_t a = 0, b = 0;
    if (!num(a)) return false;
    if (j < cps_.size() && cps_[j] == '}') {
      mn = mx = a;
    } else if (j < cps_.size() && cps_[j] == ',') {
      ++j;
      if (j < cps_.size() && cps_[j] == '}') {
        mn = a;
        mx = kInf;
      } else {
        if (!num(b) || j >= cps_.size() || cps_[j] != '}') return false;
        mn = a;
        mx = b;
      }
    } else {
      return false;
    }
    i_ = j + 1;
    return true;
  }

  static Node set_node(CpSet s) {
    Node n;
    n.kind = Node::Set;
    n.set = std::move(s);
    return n;
  }

  Result<Node> parse_atom(int depth) {
    uint32_t c = peek();
    if (c == '(') {
      ++i_;
      if (peek() == '?') {
        uint32_t k = peek(1);
        if (k == ':') {
          i_ += 2;
        } else if (k == '=' || k == '!') {
          return err("lookahead");
        } else if (k == '<' && (peek(2) == '=' || peek(2) == '!')) {
          return err("lookbehind");
        } else if (k == '<' || (k == 'P' && peek(2) == '<')) {
          i_ += k == 'P' ? 3 : 2;
          while (!at_end() && peek() != '>') ++i_;
          if (at_end()) return err("unterminated group name");
          ++i_;
        } else if (k == 'P' && peek(2) == '=') {
          return err("backreference");
        } else {
          return err("inline flags or group extension");
        }
      }
      TM_ASSIGN_OR_RETURN(Node inner, parse_alt(depth + 1));
      if (peek() != ')') return err("missing ')'");
      ++i_;
      return inner;
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      ++i_;
      return set_node(dot_set());
    }
    if (c == '^' || c == '$') {
      ++i_;
      Node n;
      n.kind = c == '^' ? Node::Start : Node::End;
      return n;
    }
    if (c == '*' || c == '+' || c == '?') return err("nothing to repeat");
    if (c == '{') {
      uint32_t a, b;
      size_t save = i_;
      if (parse_quantifier(a, b)) {
        i_ = save;
        return err("nothing to repeat");
      }
      ++i_;
      return set_node(CpSet::range('{', '{'));
    }
    if (c == '\\') {
      ++i_;
      if (at_end()) return err("trailing backslash");
      uint32_t e = peek();
      if (e == 'b' || e == 'B') return err("word boundary \\b");
      if (e == 'A' || e == 'Z' || e == 'z') {  // Python's absolute anchors
        ++i_;
        Node n;
        n.kind = e == 'A' ? Node::Start : Node::End;
        return n;
      }
      if (e >= '1' && e <= '9') return err("backreference");
      if (e == 'k') return err("named backreference");
      TM_ASSIGN_OR_RETURN(SetPair s, parse_escape(false));
      return set_node(std::move(s.small));
    }
    ++i_;
    return set_node(CpSet::range(c, c));
  }

  // After the backslash. in_class: \b is a backspace there.
  Result<SetPair> parse_escape(bool in_class) {
    uint32_t e = peek();
    ++i_;
    auto one = [](uint32_t cp) { return SetPair::same(CpSet::range(cp, cp)); };
    switch (e) {
      case 'd': return digit_pair();
      case 'D': return digit_pair().negated();
      case 'w': return word_pair();
      case 'W': return word_pair().negated();
      case 's': return space_pair();
      case 'S': return space_pair().negated();
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 't': return one('\t');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case 'a': return one('\a');
      case 'b':
        if (in_class) return one('\b');
        break;
      case '0':
        if (peek() >= '0' && peek() <= '9') return err("octal escape");
        return one(0);
      case 'c': {
        uint32_t l = peek();
        if ((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) {
          ++i_;
          return one(l % 32);
        }
        return one('c');
      }
      case 'x': {
        TM_ASSIGN_OR_RETURN(CpSet h, hex_escape(2));
        return SetPair::same(h);
      }
      case 'u':
        if (peek() == '{') {
          ++i_;
          uint32_t v = 0;
          int n = 0;
          while (!at_end() && peek() != '}') {
            int d = hexval(peek());
            if (d < 0 || ++n > 6) return err("bad \\u{...} escape");
            v = v * 16 + uint32_t(d);
            ++i_;
          }
          if (at_end() || n == 0 || v > kMaxCp) return err("bad \\u{...} escape");
          ++i_;
          return one(v);
        }
        {
          TM_ASSIGN_OR_RETURN(CpSet h, hex_escape(4));
          return SetPair::same(h);
        }
      case 'U': {
        TM_ASSIGN_OR_RETURN(CpSet h, hex_escape(8));
        return SetPair::same(h);
      }
      case 'p':
      case 'P': return err("Unicode property escape \\p");
      default: break;
    }
    if (e >= '1' && e <= '9') return err("backreference");
    if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
      // ECMAScript's Annex B treats \q as 'q', Python rejects it; no validator agrees on these.
      --i_;
      return err(std::string("unknown escape \\") + char(e));
    }
    return one(e);  // \. \* \\ \/ \- and other punctuation
  }

  static int hexval(uint32_t c) {
    if (c >= '0' && c <= '9') return int(c - '0');
    if (c >= 'a' && c <= 'f') return int(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return int(c - 'A' + 10);
    return -1;
  }

  Result<CpSet> hex_escape(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      int d = hexval(peek());
      if (d < 0) return err("bad hex escape");
      v = v * 16 + uint32_t(d);
      ++i_;
    }
    if (v > kMaxCp) return err("bad hex escape");
    return CpSet::range(v, v);
  }

  Result<Node> parse_class() {
    ++i_;  // '['
    bool neg = false;
    if (peek() == '^') {
      neg = true;
      ++i_;
    }
    SetPair s;
    bool first = true;
    while (true) {
      if (at_end()) return err("unterminated character class");
      uint32_t c = peek();
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      if (c == ']' && first) {  // ECMAScript: "[]" matches nothing, "[^]" anything
        ++i_;
        break;
      }
      first = false;
      if (c == '[' && peek(1) == ':') return err("POSIX class [:...:]");
      TM_ASSIGN_OR_RETURN(SetPair a, class_atom());
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFF) {
        if (!a.small.single() || !(a.small == a.big)) return err("range with a class escape");
        ++i_;
        TM_ASSIGN_OR_RETURN(SetPair b, class_atom());
        if (!b.small.single() || !(b.small == b.big)) return err("range with a class escape");
        if (b.small.first() < a.small.first()) return err("range out of order");
        s.small.add(a.small.first(), b.small.first());
        s.big.add(a.small.first(), b.small.first());
      } else {
        s.small.add(a.small);
        s.big.add(a.big);
      }
    }
    return set_node(neg ? s.negated().small : s.small);
  }

  Result<SetPair> class_atom() {
    uint32_t c = peek();
    if (c == '\\') {
      ++i_;
      if (at_end()) return err("trailing backslash");
      return parse_escape(true);
    }
    ++i_;
    return SetPair::same(CpSet::range(c, c));
  }

  std::string_view src_;
  std::vector<uint32_t> cps_;
  std::vector<size_t> offs_;
  size_t i_ = 0;
};

uint64_t sat_add(uint64_t a, uint64_t b) { return (a == kUnbounded || b == kUnbounded) ? kUnbounded : a + b; }
uint64_t sat_mul(uint64_t a, uint64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a == kUnbounded || b == kUnbounded) return kUnbounded;
  return a > (kUnbounded / 2) / b ? kUnbounded : a * b;
}

void lengths(const Node& n, uint64_t& mn, uint64_t& mx) {
  switch (n.kind) {
    case Node::Set:
      mn = n.set.empty() ? kUnbounded : 1;
      mx = 1;
      return;
    case Node::Start:
    case Node::End: mn = mx = 0; return;
    case Node::Seq:
      mn = mx = 0;
      for (auto& k : n.kids) {
        uint64_t a, b;
        lengths(k, a, b);
        mn = sat_add(mn, a);
        mx = sat_add(mx, b);
      }
      return;
    case Node::Alt:
      mn = kUnbounded;
      mx = 0;
      for (auto& k : n.kids) {
        uint64_t a, b;
        lengths(k, a, b);
        mn = std::min(mn, a);
        mx = std::max(mx, b);
      }
      return;
    case Node::Repeat: {
      uint64_t a, b;
      lengths(n.kids[0], a, b);
      mn = sat_mul(a, n.min);
      mx = n.max == kInf ? (b == 0 ? 0 : kUnbounded) : sat_mul(b, n.max);
      return;
    }
  }
}

bool has_anchor(const Node& n) {
  if (n.kind == Node::Start || n.kind == Node::End) return true;
  for (auto& k : n.kids) {
    if (has_anchor(k)) return true;
  }
  return false;
}

class Emitter {
 public:
  Emitter(RegexMode mode, std::string any_rule) : mode_(mode), any_rule_(std::move(any_rule)) {}

  // nullopt: matches nothing. "": matches only the empty string.
  std::optional<std::string> emit(const Node& n) {
    switch (n.kind) {
      case Node::Set:
        if (n.any && !any_rule_.empty()) return any_rule_;
        return emit_set(n.set);
      case Node::Start:
      case Node::End: return std::string();  // checked away before emitting
      case Node::Seq: {
        std::string out, lit;
        auto flush = [&] {
          if (lit.empty()) return;
          out += (out.empty() ? "" : " ") + literal(lit);
          lit.clear();
        };
        for (auto& k : n.kids) {
          if (k.kind == Node::Set && k.set.single() && encodable(k.set.first())) {
            lit += encode(k.set.first());
            continue;
          }
          auto e = emit(k);
          if (!e) return std::nullopt;
          if (e->empty()) continue;
          flush();
          out += (out.empty() ? "" : " ") + group(*e);
        }
        flush();
        return out;
      }
      case Node::Alt: {
        std::vector<std::string> alts;
        bool empty_alt = false;
        for (auto& k : n.kids) {
          auto e = emit(k);
          if (!e) continue;
          if (e->empty()) {
            empty_alt = true;
            continue;
          }
          if (std::find(alts.begin(), alts.end(), *e) == alts.end()) alts.push_back(*e);
        }
        if (alts.empty()) return empty_alt ? std::optional<std::string>(std::string()) : std::nullopt;
        std::string out;
        for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
        if (empty_alt) return "( " + out + " )?";
        return alts.size() == 1 ? out : "( " + out + " )";
      }
      case Node::Repeat: {
        auto e = emit(n.kids[0]);
        if (!e) return n.min == 0 ? std::optional<std::string>(std::string()) : std::nullopt;
        if (e->empty() || n.max == 0) return std::string();
        std::string g = group(*e);
        if (n.min == 0 && n.max == kInf) return g + "*";
        if (n.min == 1 && n.max == kInf) return g + "+";
        if (n.min == 0 && n.max == 1) return g + "?";
        if (n.min == 1 && n.max == 1) return *e;
        if (n.max == kInf) return g + "{" + std::to_string(n.min) + ",}";
        if (n.min == n.max) return g + "{" + std::to_string(n.min) + "}";
        return g + "{" + std::to_string(n.min) + "," + std::to_string(n.max) + "}";
      }
    }
    return std::nullopt;
  }

  std::string any_char() { return *emit_set(CpSet::any()); }

 private:
  bool encodable(uint32_t cp) const { return !(cp >= 0xD800 && cp <= 0xDFFF); }
  std::string encode(uint32_t cp) const { return mode_ == RegexMode::JsonString ? json_escape_cp(cp) : utf8(cp); }

  std::optional<std::string> emit_set(const CpSet& s0) {
    CpSet s = s0.minus(CpSet::range(0xD800, 0xDFFF));
    if (s.empty()) return std::nullopt;
    if (s.single()) return literal(encode(s.first()));
    if (mode_ == RegexMode::JsonString) return json_char_expr(s);
    return gbnf_class(s);
  }

  RegexMode mode_;
  std::string any_rule_;
};

// Search semantics: an unanchored side may be preceded/followed by anything. A repetition at that
// side keeps only its required minimum (X+ .* == X .*): same language, far less ambiguity.
void trim_open_side(std::vector<Node>& els, bool front) {
  while (!els.empty()) {
    Node& n = front ? els.front() : els.back();
    if (n.kind != Node::Repeat) return;
    if (n.min == 0) {
      if (front) {
        els.erase(els.begin());
      } else {
        els.pop_back();
      }
      continue;
    }
    n.max = n.min;
    return;
  }
}

struct Branch {
  std::vector<Node> els;
  bool start = false, end = false;
};

// Splits the top level into alternatives, each with its own ^ / $ (e.g. "^a$|^b$", "(^a|b$)").
Status collect_branches(const Node& n, std::vector<Branch>& out) {
  if (n.kind == Node::Alt) {
    for (auto& k : n.kids) TM_TRY(collect_branches(k, out));
    return ok_status();
  }
  std::vector<Node> els = n.kind == Node::Seq ? n.kids : std::vector<Node>{n};
  if (els.size() == 1 && els[0].kind == Node::Alt) return collect_branches(els[0], out);
  Branch b;
  size_t lo = 0, hi = els.size();
  while (lo < hi && els[lo].kind == Node::Start) {
    b.start = true;
    ++lo;
  }
  while (hi > lo && els[hi - 1].kind == Node::End) {
    b.end = true;
    --hi;
  }
  b.els.assign(els.begin() + lo, els.begin() + hi);
  for (auto& e : b.els) {
    if (has_anchor(e)) return Error{"anchor ^ or $ inside the pattern"};
  }
  out.push_back(std::move(b));
  return ok_status();
}

}  // namespace

// Fits a branch to a length range: its open sides become explicit any-character repetitions and the
// one variable-length element (a repetition of single characters) gets its count bounds. False when
// the branch has more than one variable element; `dead` when no length fits.
static bool fit_length(std::vector<Node>& els, bool& open_front, bool& open_back, uint64_t lo, uint64_t hi, bool& dead) {
  dead = false;
  Node any_rep;
  any_rep.kind = Node::Repeat;
  any_rep.min = 0;
  any_rep.max = kInf;
  Node any_set;
  any_set.kind = Node::Set;
  any_set.set = CpSet::any();
  any_set.any = true;
  any_rep.kids.push_back(any_set);
  std::vector<Node> e = els;
  if (open_front) e.insert(e.begin(), any_rep);
  if (open_back) e.push_back(any_rep);
  uint64_t fixed = 0;
  int var = -1;
  for (size_t i = 0; i < e.size(); ++i) {
    uint64_t a, b;
    lengths(e[i], a, b);
    if (a == b) {
      fixed = sat_add(fixed, a);
      continue;
    }
    if (var >= 0 || e[i].kind != Node::Repeat) return false;
    uint64_t ka, kb;
    lengths(e[i].kids[0], ka, kb);
    if (ka != 1 || kb != 1) return false;
    var = int(i);
  }
  if (fixed == kUnbounded) return false;
  if (var < 0) {
    dead = fixed < lo || fixed > hi;
  } else {
    Node& r = e[size_t(var)];
    uint64_t mn = std::max<uint64_t>(r.min, lo > fixed ? lo - fixed : 0);
    uint64_t mx = r.max == kInf ? kUnbounded : r.max;
    if (hi != kUnbounded) mx = hi < fixed ? 0 : std::min(mx, hi - fixed);
    if (hi != kUnbounded && hi < fixed) dead = true;
    if (mn > mx || mn > (1u << 30) || (mx != kUnbounded && mx > (1u << 30))) {
      if (mn > mx) dead = true;
      if (!dead) return false;
    }
    if (!dead) {
      r.min = uint32_t(mn);
      r.max = mx == kUnbounded ? kInf : uint32_t(mx);
    }
  }
  els = std::move(e);
  open_front = open_back = false;
  return true;
}

Result<RegexGbnf> regex_expr(std::string_view pattern, RegexMode mode, bool search, std::string_view any_rule,
                             uint64_t len_min, uint64_t len_max) {
  Parser p(pattern);
  TM_ASSIGN_OR_RETURN(Node root, p.parse());
  std::vector<Branch> branches;
  if (auto st = collect_branches(root, branches); !st.ok()) {
    return Error{"pattern /" + std::string(pattern) + "/: " + st.error() + " (not supported)"};
  }
  Emitter em(mode, std::string(any_rule));
  std::string any = any_rule.empty() ? group(em.any_char()) : std::string(any_rule);
  RegexGbnf out;
  out.min_len = kUnbounded;
  out.max_len = 0;
  // Branches with the same open sides share one prefix/suffix: "a|b|c" is .*(a|b|c).*, not three
  // copies of .* around each word.
  struct Group {
    bool front, back;
    std::vector<std::string> alts;
    bool empty_alt = false;
  };
  std::vector<Group> groups;
  for (auto& b : branches) {
    bool open_front = search && !b.start, open_back = search && !b.end;
    if (open_front) trim_open_side(b.els, true);
    if (open_back) trim_open_side(b.els, false);
    Node seq;
    seq.kind = Node::Seq;
    seq.kids = b.els;
    uint64_t mn, mx;
    lengths(seq, mn, mx);
    if (open_front || open_back) mx = kUnbounded;
    if (mn < len_min || mx > len_max) {
      bool dead = false;
      if (!fit_length(seq.kids, open_front, open_back, len_min, len_max, dead)) {
        return Error{"pattern /" + std::string(pattern) + "/: cannot be combined with minLength/maxLength"};
      }
      if (dead) continue;
      lengths(seq, mn, mx);
    }
    auto e = em.emit(seq);
    if (!e) continue;
    out.min_len = std::min(out.min_len, mn);
    out.max_len = std::max(out.max_len, mx);
    Group* g = nullptr;
    for (auto& x : groups) {
      if (x.front == open_front && x.back == open_back) g = &x;
    }
    if (!g) {
      groups.push_back({open_front, open_back, {}, false});
      g = &groups.back();
    }
    if (e->empty()) {
      g->empty_alt = true;
    } else if (std::find(g->alts.begin(), g->alts.end(), *e) == g->alts.end()) {
      g->alts.push_back(*e);
    }
  }
  if (groups.empty()) return Error{"pattern /" + std::string(pattern) + "/ matches nothing"};
  std::vector<std::string> alts;
  bool empty_alt = false;
  for (auto& g : groups) {
    std::string core;
    for (size_t i = 0; i < g.alts.size(); ++i) core += (i ? " | " : "") + g.alts[i];
    if (g.alts.size() > 1) core = "( " + core + " )";
    if (g.empty_alt && !core.empty()) core = (g.alts.size() > 1 ? core : "( " + core + " )") + "?";
    if (g.front && g.back && (g.empty_alt || core.empty())) {
      alts.push_back(any + "*");  // matches anywhere, also nowhere
      continue;
    }
    std::string s;
    if (g.front) s += any + "* ";
    s += core;
    if (g.back) s += (s.empty() || s.back() == ' ' ? "" : " ") + any + "*";
    while (!s.empty() && s.back() == ' ') s.pop_back();
    if (s.empty()) {
      empty_alt = true;
    } else {
      alts.push_back(s);
    }
  }
  if (alts.empty()) {
    out.expr = "\"\"";
    return out;
  }
  std::string joined;
  for (size_t i = 0; i < alts.size(); ++i) joined += (i ? " | " : "") + alts[i];
  if (empty_alt) {
    out.expr = "( " + joined + " )?";
  } else {
    out.expr = alts.size() == 1 ? joined : "( " + joined + " )";
  }
  return out;
}

}  // namespace tmill::grammar::detail

namespace tmill::grammar {

Result<std::string> regex_to_gbnf(std::string_view pattern) {
  TM_ASSIGN_OR_RETURN(auto r, detail::regex_expr(pattern, detail::RegexMode::Raw, false));
  return "root ::= " + r.expr + "\n";
}

}  // namespace tmill::grammar
