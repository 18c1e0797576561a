// Numbers: integer ranges as exact digit-range grammars over decimal strings of any length,
// numbers between integral bounds (integer part by range, fraction by its zero/non-zero digits),
// multipleOf as a residue automaton (integers) or a bound on fraction digits (10^-d).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "grammar/json_schema_impl.h"

namespace tmill::grammar::detail {

namespace {

// Exact decimal: value = (neg ? -1 : 1) * int.frac; int has no leading zeros ("0" for zero), frac
// no trailing zeros.
struct Dec {
  bool neg = false;
  std::string i = "0";
  std::string f;
  bool zero() const { return i == "0" && f.empty(); }
};

std::optional<Dec> parse_dec(const std::string& s) {
  Dec d;
  size_t p = 0;
  if (p < s.size() && s[p] == '-') {
    d.neg = true;
    ++p;
  }
  std::string digits;
  long point = -1;
  for (; p < s.size() && (isdigit(static_cast<unsigned char>(s[p])) || s[p] == '.'); ++p) {
    if (s[p] == '.') {
      point = long(digits.size());
    } else {
      digits += s[p];
    }
  }
  if (digits.empty()) return std::nullopt;
  if (point < 0) point = long(digits.size());
  if (p < s.size() && (s[p] == 'e' || s[p] == 'E')) {
    long e = std::strtol(s.c_str() + p + 1, nullptr, 10);
    if (e > 400 || e < -400) return std::nullopt;
    point += e;
  }
  while (point < 0) {
    digits.insert(digits.begin(), '0');
    ++point;
  }
  while (long(digits.size()) < point) digits += '0';
  d.i = digits.substr(0, size_t(point));
  d.f = digits.substr(size_t(point));
  d.i.erase(0, std::min(d.i.find_first_not_of('0'), d.i.size()));
  if (d.i.empty()) d.i = "0";
  while (!d.f.empty() && d.f.back() == '0') d.f.pop_back();
  if (d.zero()) d.neg = false;
  return d;
}

int cmp_mag(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

std::string inc_mag(std::string a) {
  int k = int(a.size()) - 1;
  while (k >= 0 && a[size_t(k)] == '9') a[size_t(k--)] = '0';
  if (k < 0) return "1" + a;
  ++a[size_t(k)];
  return a;
}

std::string dec_mag(std::string a) {  // a > 0
  int k = int(a.size()) - 1;
  while (k >= 0 && a[size_t(k)] == '0') a[size_t(k--)] = '9';
  --a[size_t(k)];
  a.erase(0, std::min(a.find_first_not_of('0'), a.size() - 1));
  return a;
}

// Signed integers.
struct SInt {
  bool neg = false;
  std::string mag = "0";
};

SInt plus_one(SInt x) {
  if (!x.neg) return {false, inc_mag(x.mag)};
  std::string m = dec_mag(x.mag);
  return {m != "0", m};
}
SInt minus_one(SInt x) {
  if (x.neg) return {true, inc_mag(x.mag)};
  if (x.mag == "0") return {true, "1"};
  return {false, dec_mag(x.mag)};
}
SInt floor_of(const Dec& d) {
  SInt s{d.neg, d.i};
  if (!d.f.empty() && d.neg) s.mag = inc_mag(s.mag);
  if (s.mag == "0") s.neg = false;
  return s;
}
SInt ceil_of(const Dec& d) {
  SInt s{d.neg, d.i};
  if (!d.f.empty() && !d.neg) s.mag = inc_mag(s.mag);
  if (s.mag == "0") s.neg = false;
  return s;
}
int cmp_int(const SInt& a, const SInt& b) {
  if (a.neg != b.neg) return a.neg ? -1 : 1;
  int c = cmp_mag(a.mag, b.mag);
  return a.neg ? -c : c;
}

std::string digit_class(int lo, int hi) {
  if (lo == hi) return "\"" + std::string(1, char('0' + lo)) + "\"";
  return "[" + std::string(1, char('0' + lo)) + "-" + std::string(1, char('0' + hi)) + "]";
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

// Digit strings of one length between x and y (x <= y, same length, as strings).
std::string same_len(const std::string& x, const std::string& y) {
  if (x.empty()) return "";
  if (x == y) return literal(x);
  size_t p = 0;
  while (x[p] == y[p]) ++p;
  std::string prefix = x.substr(0, p);
  std::string xs = x.substr(p), ys = y.substr(p);
  size_t m = xs.size() - 1;
  bool low_full = xs.find_first_not_of('0', 1) == std::string::npos;
  bool high_full = ys.find_first_not_of('9', 1) == std::string::npos;
  int d1 = xs[0] - '0' + (low_full ? 0 : 1), d2 = ys[0] - '0' - (high_full ? 0 : 1);
  std::vector<std::string> alts;
  if (!low_full) alts.push_back(literal(xs.substr(0, 1)) + " " + group(same_len(xs.substr(1), std::string(m, '9'))));
  if (d1 <= d2) alts.push_back(digit_class(d1, d2) + (m ? " " + any_digits(m) : ""));
  if (!high_full) alts.push_back(literal(ys.substr(0, 1)) + " " + group(same_len(std::string(m, '0'), ys.substr(1))));
  std::string body;
  for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
  if (alts.size() > 1) body = "( " + body + " )";
  return prefix.empty() ? body : literal(prefix) + " " + body;
}

// Canonical non-negative integers in [a, b] (b: nullopt = unbounded).
std::string digits_range(const std::string& a, const std::optional<std::string>& b) {
  std::vector<std::string> alts;
  size_t la = a.size();
  size_t lb = b ? b->size() : la;
  for (size_t L = la; L <= lb; ++L) {
    std::string lo = L == la ? a : "1" + std::string(L - 1, '0');
    std::string hi = (b && L == lb) ? *b : std::string(L, '9');
    if (cmp_mag(lo, hi) > 0) continue;
    alts.push_back(same_len(lo, hi));
  }
  if (!b) alts.push_back("[1-9] [0-9]{" + std::to_string(la) + ",}");
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return alts.size() > 1 ? "( " + out + " )" : out;
}

struct Frac {
  std::string any, zero, nonzero;  // fraction parts: any value, zero value, non-zero value
};

// Integer-part ranges with fractions for a magnitude interval between integers a and b.
void magnitude(std::vector<std::string>& out, const std::string& prefix, const std::string& a, bool a_open,
               const std::optional<std::string>& b, bool b_open, const Frac& fr) {
  auto push = [&](const std::string& d, const std::string& f) { out.push_back(prefix + group(d) + (f.empty() ? "" : " " + f)); };
  if (!b) {
    if (!a_open) {
      push(digits_range(a, std::nullopt), fr.any);
    } else {
      push(digits_range(inc_mag(a), std::nullopt), fr.any);
      push(literal(a), fr.nonzero);
    }
    return;
  }
  int c = cmp_mag(a, *b);
  if (c > 0) return;
  if (c == 0) {
    if (!a_open && !b_open) push(literal(a), fr.zero);
    return;
  }
  std::string lo_any = a_open ? inc_mag(a) : a;  // integer parts with any fraction: [lo_any, b-1]
  std::string hi_any = dec_mag(*b);
  if (a_open) push(literal(a), fr.nonzero);
  if (cmp_mag(lo_any, hi_any) <= 0) push(digits_range(lo_any, hi_any), fr.any);
  if (!b_open) push(literal(*b), fr.zero);
}

// Fractions (the digits after the point, "" when there is none) compared as decimals 0.f against
// bounds: the language of f, as whether "" belongs and an expression for the non-empty ones.
struct FracLang {
  bool empty_ok = false;
  std::optional<std::string> ne;
  std::string full() const {  // "( "." ne )?" etc.; "" = only no fraction; "!" = nothing
    if (!ne) return empty_ok ? "" : "!";
    return empty_ok ? "( \".\" " + *ne + " )?" : "\".\" " + *ne;
  }
};
struct FracSide {
  bool on = false;  // bounded on this side
  std::string x;    // bound digits (no trailing zeros)
  bool open = false;
};

FracLang frac_lang(const FracSide& lo, const FracSide& hi) {
  bool lo_free = !lo.on || (lo.x.empty() && !lo.open);
  bool hi_free = !hi.on;
  FracLang L;
  if (lo_free && hi_free) {
    L.empty_ok = true;
    L.ne = "[0-9]+";
    return L;
  }
  if (hi.on && hi.x.empty()) {  // f <= 0 (only zeros) or f < 0 (nothing)
    if (hi.open || (lo.on && lo.x.empty() && lo.open)) return L;
    if (lo_free) {
      L.empty_ok = true;
      L.ne = "\"0\"+";
      return L;
    }
    return L;  // lo > 0 needs a non-zero digit
  }
  if (lo.on && lo.x.empty() && lo.open && hi_free) {  // f > 0
    L.ne = "\"0\"* [1-9] [0-9]*";
    return L;
  }
  L.empty_ok = lo_free && (!hi.on || !hi.x.empty() || !hi.open);
  // First digit d, grouped by what the rest must satisfy.
  std::vector<std::pair<std::string, std::string>> groups;  // (rest language, digit class)
  std::vector<std::string> order;
  std::map<std::string, CpSet> digits;
  for (int d = 0; d <= 9; ++d) {
    FracSide rl, rh;
    if (!lo_free) {
      int x0 = lo.x.empty() ? 0 : lo.x[0] - '0';
      if (d < x0) continue;
      if (d == x0) rl = {true, lo.x.empty() ? "" : lo.x.substr(1), lo.open};
    }
    if (!hi_free) {
      int y0 = hi.x[0] - '0';
      if (d > y0) continue;
      if (d == y0) rh = {true, hi.x.substr(1), hi.open};
    }
    FracLang r = frac_lang(rl, rh);
    std::string rest;
    if (r.ne) {
      rest = r.empty_ok ? group(*r.ne) + "?" : *r.ne;
    } else if (r.empty_ok) {
      rest = "";
    } else {
      continue;
    }
    if (!digits.count(rest)) order.push_back(rest);
    digits[rest].add(uint32_t('0' + d), uint32_t('0' + d));
  }
  std::string alts;
  for (auto& rest : order) {
    alts += (alts.empty() ? "" : " | ") + gbnf_class(digits[rest]) + (rest.empty() ? "" : " " + rest);
  }
  if (!alts.empty()) L.ne = order.size() > 1 ? "( " + alts + " )" : alts;
  return L;
}

// Decimal magnitudes between a = ai.af and b = bi.bf (b absent: unbounded).
void magnitude_dec(std::vector<std::string>& out, const std::string& prefix, const Dec& a, bool a_open,
                   const std::optional<Dec>& b, bool b_open) {
  auto push = [&](const std::string& d, const FracLang& f) {
    std::string fr = f.full();
    if (fr == "!") return;
    out.push_back(prefix + group(d) + (fr.empty() ? "" : " " + fr));
  };
  FracSide none;
  FracLang any;
  any.empty_ok = true;
  any.ne = "[0-9]+";
  if (!b) {
    push(literal(a.i), frac_lang({true, a.f, a_open}, none));
    push(digits_range(inc_mag(a.i), std::nullopt), any);
    return;
  }
  int ci = cmp_mag(a.i, b->i);
  if (ci > 0) return;
  if (ci == 0) {
    push(literal(a.i), frac_lang({true, a.f, a_open}, {true, b->f, b_open}));
    return;
  }
  push(literal(a.i), frac_lang({true, a.f, a_open}, none));
  std::string lo = inc_mag(a.i), hi = dec_mag(b->i);
  if (cmp_mag(lo, hi) <= 0) push(digits_range(lo, hi), any);
  push(literal(b->i), frac_lang(none, {true, b->f, b_open}));
}

struct Bound {
  std::optional<Dec> v;
  bool open = false;
};

Result<Bound> read_bound(const Json& s, bool lower, const std::string& ptr) {
  const char* inc = lower ? "minimum" : "maximum";
  const char* exc = lower ? "exclusiveMinimum" : "exclusiveMaximum";
  Bound b;
  auto take = [&](const Json& v, bool open, const char* k) -> Status {
    if (!v.is_number()) return Error{std::string("'") + k + "' must be a number at '" + ptr + "'"};
    auto d = parse_dec(v.dump());
    if (!d) return Error{std::string("unsupported keyword '") + k + "' at '" + ptr + "': value out of range"};
    if (!b.v) {
      b.v = d;
      b.open = open;
      return ok_status();
    }
    // Keep the tighter one.
    Json cur = Json::parse((b.v->neg ? "-" : "") + b.v->i + (b.v->f.empty() ? "" : "." + b.v->f));
    double x = cur.get<double>(), y = v.get<double>();
    if ((lower && y > x) || (!lower && y < x) || (y == x && open)) {
      b.v = d;
      b.open = open;
    }
    return ok_status();
  };
  auto ex = s.find(exc);
  bool draft4_open = ex != s.end() && ex->is_boolean() && ex->get<bool>();
  if (auto it = s.find(inc); it != s.end()) TM_TRY(take(*it, draft4_open, inc));
  if (ex != s.end() && !ex->is_boolean()) TM_TRY(take(*ex, true, exc));
  return b;
}

}  // namespace

Result<std::string> Compiler::gen_number(const Json& s, const std::string& ptr, bool integer) {
  TM_ASSIGN_OR_RETURN(Bound lo, read_bound(s, true, ptr));
  TM_ASSIGN_OR_RETURN(Bound hi, read_bound(s, false, ptr));
  // multipleOf: an integer k, or 10^-d (at most d fraction digits).
  std::optional<std::string> mult_int;
  int frac_digits = -1;
  bool force_int = false;
  if (auto it = s.find("multipleOf"); it != s.end()) {
    if (!it->is_number() || it->get<double>() <= 0) return Error{"'multipleOf' must be a positive number at '" + ptr + "'"};
    auto d = parse_dec(it->dump());
    if (!d) return Error{"unsupported keyword 'multipleOf' at '" + ptr + "'"};
    if (d->f.empty()) {
      if (d->i == "1") {
        force_int = true;  // multipleOf 1: integral values
      } else {
        mult_int = d->i;
      }
    } else if (d->i == "0" && d->f.back() == '1' && d->f.find_first_not_of('0') == d->f.size() - 1) {
      if (!integer) frac_digits = int(d->f.size());
    } else {
      return Error{"unsupported keyword 'multipleOf' at '" + ptr + "': only integers and powers of ten (0.1, 0.01, ...)"};
    }
  }
  const bool int_only = integer || force_int || mult_int.has_value();
  const std::string int_tail = opt_.flexible_whitespace ? " ( \".\" \"0\"+ )?" : "";  // 3.0 is an integer

  if (mult_int) {
    if (mult_int->size() > 4) return Error{"unsupported keyword 'multipleOf' at '" + ptr + "': too large"};
    int k = std::stoi(*mult_int);
    // Only lower bounds 0 / 1 (non-negative / positive) combine with the residue automaton.
    bool nonneg = false, positive = false;
    if (hi.v) return Error{"unsupported keyword 'multipleOf' at '" + ptr + "': together with a maximum"};
    if (lo.v) {
      SInt l = lo.open ? plus_one(floor_of(*lo.v)) : ceil_of(*lo.v);
      if (l.neg) return Error{"unsupported keyword 'multipleOf' at '" + ptr + "': together with a negative minimum"};
      if (l.mag == "0") {
        nonneg = true;
      } else if (l.mag == "1" || cmp_mag(l.mag, *mult_int) <= 0) {
        positive = true;  // the smallest positive multiple is k
      } else {
        return Error{"unsupported keyword 'multipleOf' at '" + ptr + "': together with this minimum"};
      }
    }
    std::vector<std::string> names(static_cast<size_t>(k), std::string());
    for (int r = 0; r < k; ++r) names[size_t(r)] = rules_.reserve("mult");
    for (int r = 0; r < k; ++r) {
      std::vector<std::string> alts;
      for (int t = 0; t < k; ++t) {
        CpSet ds;
        for (int d = 0; d <= 9; ++d) {
          if ((10 * r + d) % k == t) ds.add(uint32_t('0' + d), uint32_t('0' + d));
        }
        if (!ds.empty()) alts.push_back(gbnf_class(ds) + " " + names[size_t(t)]);
      }
      std::string body;
      for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
      rules_.define(names[size_t(r)], r == 0 ? "( " + body + " )?" : body);
    }
    std::vector<std::string> first;
    for (int t = 0; t < k; ++t) {
      CpSet ds;
      for (int d = 1; d <= 9; ++d) {
        if (d % k == t) ds.add(uint32_t('0' + d), uint32_t('0' + d));
      }
      if (!ds.empty()) first.push_back(gbnf_class(ds) + " " + names[size_t(t)]);
    }
    std::string pos;
    for (size_t i = 0; i < first.size(); ++i) pos += (i ? " | " : "") + first[i];
    std::string p = rules_.add("mult-pos", pos);
    std::string out = positive ? p : nonneg ? "( \"0\" | " + p + " )" : "( \"0\" | \"-\"? " + p + " )";
    return out + int_tail;
  }

  if (int_only) {
    std::optional<SInt> l, h;
    if (lo.v) l = lo.open ? plus_one(floor_of(*lo.v)) : ceil_of(*lo.v);
    if (hi.v) h = hi.open ? minus_one(ceil_of(*hi.v)) : floor_of(*hi.v);
    if (!l && !h) {
      return rules_.add("integer", "\"-\"? ( \"0\" | [1-9] [0-9]* )") + int_tail;
    }
    if (l && h && cmp_int(*l, *h) > 0) return kNever;
    std::vector<std::string> alts;
    // Non-negative part: [max(l, 0), h].
    if (!h || !h->neg) {
      std::string a = (l && !l->neg) ? l->mag : "0";
      alts.push_back(digits_range(a, h ? std::optional<std::string>(h->mag) : std::nullopt));
    }
    // Negative part: magnitudes [max(1, -h), -l].
    if (!l || l->neg) {
      std::string a = (h && h->neg) ? h->mag : "1";
      alts.push_back("\"-\" " + group(digits_range(a, l ? std::optional<std::string>(l->mag) : std::nullopt)));
    }
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return rules_.add("int-range", out) + int_tail;
  }

  Frac fr;
  if (frac_digits > 0) {
    fr.any = "( \".\" [0-9]{1," + std::to_string(frac_digits) + "} \"0\"* )?";
    fr.nonzero = "\".\" " + (frac_digits > 1 ? "[0-9]{0," + std::to_string(frac_digits - 1) + "} " : "") + "[1-9] \"0\"*";
  } else {
    fr.any = "( \".\" [0-9]+ )?";
    fr.nonzero = "\".\" \"0\"* [1-9] [0-9]*";
  }
  fr.zero = "( \".\" \"0\"+ )?";
  if (!lo.v && !hi.v) {
    if (frac_digits > 0) return rules_.add("number-dec", "\"-\"? ( \"0\" | [1-9] [0-9]* ) " + fr.any);
    return rules_.add("number",
                      "\"-\"? ( \"0\" | [1-9] [0-9]* ) ( \".\" [0-9]+ )? ( [eE] [-+]? [0-9]+ )?");
  }
  if ((lo.v && !lo.v->f.empty()) || (hi.v && !hi.v->f.empty())) {
    if (frac_digits > 0) {
      return Error{std::string("unsupported keyword 'multipleOf' at '") + ptr + "': with a non-integral bound"};
    }
    // Decimal bounds: integer part by range, the fraction compared digit by digit at the ends.
    std::vector<std::string> alts;
    Dec zero;
    auto cmp_signed = [](const Dec& x, const Dec& y) {
      if (x.neg != y.neg) return x.neg ? -1 : 1;
      int c = cmp_mag(x.i, y.i);
      if (c == 0) c = x.f < y.f ? -1 : x.f > y.f ? 1 : 0;  // no trailing zeros: string order is numeric
      return x.neg ? -c : c;
    };
    if (lo.v && hi.v) {
      int c = cmp_signed(*lo.v, *hi.v);
      if (c > 0 || (c == 0 && (lo.open || hi.open))) return kNever;
    }
    bool pos = !hi.v || cmp_signed(*hi.v, zero) > 0 || (hi.v->zero() && !hi.open);
    if (pos) {
      bool lo_pos = lo.v && !lo.v->neg;
      magnitude_dec(alts, "", lo_pos ? *lo.v : zero, lo_pos ? lo.open : false,
                    hi.v ? std::optional<Dec>(*hi.v) : std::nullopt, hi.open);
    }
    if (!lo.v || lo.v->neg) {
      Dec a = zero;
      bool a_open = true;
      if (hi.v && hi.v->neg) {
        a = *hi.v;
        a.neg = false;
        a_open = hi.open;
      }
      std::optional<Dec> b;
      if (lo.v) {
        b = *lo.v;
        b->neg = false;
      }
      magnitude_dec(alts, "\"-\" ", a, a_open, b, lo.open);
    }
    if (alts.empty()) return kNever;
    std::string out;
    for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
    return rules_.add("num-range", out);
  }
  // Bounded numbers are written without exponents.
  std::vector<std::string> alts;
  bool hi_blocks_pos = hi.v && (hi.v->neg || (hi.v->zero() && hi.open));
  if (!hi_blocks_pos) {
    std::string a = (lo.v && !lo.v->neg) ? lo.v->i : "0";
    bool a_open = (lo.v && !lo.v->neg) ? lo.open : false;
    magnitude(alts, "", a, a_open, hi.v ? std::optional<std::string>(hi.v->i) : std::nullopt, hi.open, fr);
  }
  if (!lo.v || lo.v->neg) {
    std::string a = (hi.v && hi.v->neg) ? hi.v->i : "0";
    bool a_open = (hi.v && hi.v->neg) ? hi.open : true;
    magnitude(alts, "\"-\" ", a, a_open, lo.v ? std::optional<std::string>(lo.v->i) : std::nullopt, lo.open, fr);
  }
  if (alts.empty()) return kNever;
  std::string out;
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return rules_.add("num-range", out);
}

}  // namespace tmill::grammar::detail
