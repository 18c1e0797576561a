// Jinja2's text and number filters, plus Hugging Face's tojson (json.dumps with ensure_ascii=False by
// default, Python separators, no HTML escaping).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "jinja/filters.h"
#include "jinja/pystr.h"

namespace tmill::jinja {

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace filt {

namespace {
// Python float(str): optional whitespace, sign, digits with underscores, inf/nan.
std::optional<double> parse_float(const std::string& s) {
  std::string t = py::strip(s, nullptr, true, true), clean;
  if (t.empty()) return std::nullopt;
  for (size_t k = 0; k < t.size(); ++k) {
    if (t[k] == '_') {
      if (k == 0 || k + 1 >= t.size() || !std::isdigit(static_cast<unsigned char>(t[k - 1])) ||
          !std::isdigit(static_cast<unsigned char>(t[k + 1])))
        return std::nullopt;
      continue;
    }
    clean += t[k];
  }
  std::string low = py::lower(clean);
  std::string body = (low[0] == '+' || low[0] == '-') ? low.substr(1) : low;
  if (body == "inf" || body == "infinity" || body == "nan") {
    double x = body == "nan" ? NAN : INFINITY;
    return low[0] == '-' ? -x : x;
  }
  if (body.find_first_not_of("0123456789.e+-") != std::string::npos || body.find_first_of("0123456789") == std::string::npos)
    return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return d;
}

std::optional<int64_t> parse_int(const std::string& s, int base) {
  std::string t = py::strip(s, nullptr, true, true);
  bool neg = false;
  size_t k = 0;
  if (k < t.size() && (t[k] == '+' || t[k] == '-')) neg = t[k++] == '-';
  std::string low = py::lower(t.substr(k));
  if ((base == 16 && low.rfind("0x", 0) == 0) || (base == 8 && low.rfind("0o", 0) == 0) ||
      (base == 2 && low.rfind("0b", 0) == 0))
    low = low.substr(2);
  if (low.empty() || low.front() == '_' || low.back() == '_' || low.find("__") != std::string::npos) return std::nullopt;
  low.erase(std::remove(low.begin(), low.end(), '_'), low.end());
  if (low.empty() || base < 2 || base > 36) return std::nullopt;
  uint64_t acc = 0;
  for (char c : low) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'z') ? c - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (acc > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) raise("OverflowError", "integer too large (64-bit integers)");
    acc = acc * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  if (acc > static_cast<uint64_t>(INT64_MAX) + (neg ? 1 : 0)) raise("OverflowError", "integer too large (64-bit integers)");
  return neg ? static_cast<int64_t>(0 - acc) : static_cast<int64_t>(acc);
}

}  // namespace

Value f_abs(Interp&, const Value& v, Args& a) {
  a.check("abs", 0, {});
  if (v.kind == Kind::Float) return Value::number(std::fabs(v.f));
  if (v.is_int()) {
    if (v.as_int() == INT64_MIN) raise("OverflowError", "integer result too large (64-bit integers)");
    return Value::integer(std::llabs(v.as_int()));
  }
  if (v.is_undefined()) fail_undefined(v);
  raise("TypeError", "bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_capitalize(Interp&, const Value& v, Args&) { return text(py::capitalize(soft_str(v)), v); }

Value f_lower(Interp&, const Value& v, Args&) { return text(py::lower(soft_str(v)), v); }

Value f_upper(Interp&, const Value& v, Args&) { return text(py::upper(soft_str(v)), v); }

Value f_title(Interp&, const Value& v, Args&) {
  std::string s = soft_str(v), out;
  bool start = true;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t c = py::next_cp(s, pos);
    bool delim = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::is_space(c);
    if (delim || !start) {
      py::append_utf8(out, delim ? c : py::to_lower(c));
    } else {
      std::string one;
      py::append_utf8(one, c);
      out += py::upper(one);
    }
    start = delim;
  }
  return text(std::move(out), v);
}

Value f_center(Interp& in, const Value& v, Args& a) {
  Args b;
  b.pos.push_back(arg_or(a, 0, "width", Value::integer(80)));
  Value s = Value::string(soft_str(v));
  Value out;
  builtin_attr(s, "center", out);
  return in.call(out, b);
}

Value f_escape(Interp&, const Value& v, Args&) {
  if (v.kind == Kind::String && v.markup) return v;
  return Value::string(html_escape(soft_str(v)), true);
}

Value f_forceescape(Interp&, const Value& v, Args&) { return Value::string(html_escape(soft_str(v)), true); }

Value f_safe(Interp&, const Value& v, Args&) { return Value::string(soft_str(v), true); }

Value f_string(Interp&, const Value& v, Args&) {
  if (v.kind == Kind::String) return v;
  return Value::string(to_str(v));
}

Value f_int(Interp&, const Value& v, Args& a) {
  a.check("int", 2, {"default", "base"});
  static const Value zero = Value::integer(0);
  const Value& dflt = arg_or(a, 0, "default", zero);
  int base = static_cast<int>(arg_int(arg_or(a, 1, "base", Value::integer(10)), "base"));
  if (v.is_undefined()) fail_undefined(v);
  auto from_double = [&](double d) -> Value {
    if (std::isnan(d) || std::isinf(d)) raise(std::isnan(d) ? "ValueError" : "OverflowError", "cannot convert float to integer");
    if (std::fabs(d) >= 9.2e18) raise("OverflowError", "integer too large (64-bit integers)");
    return Value::integer(static_cast<int64_t>(d));
  };
  if (v.kind == Kind::String) {
    if (auto i = parse_int(v.str(), base)) return Value::integer(*i);
    if (auto d = parse_float(v.str())) return from_double(*d);
    return dflt;
  }
  if (v.is_int() && v.kind != Kind::Float) return Value::integer(v.as_int());
  if (v.kind == Kind::Float) return from_double(v.f);
  return dflt;
}

Value f_float(Interp&, const Value& v, Args& a) {
  a.check("float", 1, {"default"});
  static const Value zero = Value::number(0.0);
  const Value& dflt = arg_or(a, 0, "default", zero);
  if (v.is_number()) return Value::number(v.as_double());
  if (v.kind == Kind::String) {
    if (auto d = parse_float(v.str())) return Value::number(*d);
    return dflt;
  }
  if (v.is_undefined()) fail_undefined(v);
  return dflt;
}

Value f_format(Interp&, const Value& v, Args& a) {
  if (!a.pos.empty() && !a.kw.empty()) raise("FilterArgumentError", "can't handle positional and keyword arguments at the same time");
  Value args;
  if (!a.kw.empty()) {
    auto d = std::make_shared<DictObj>();
    for (auto& [k, x] : a.kw) d->set(Value::string(k), x);
    args = make_dict(std::move(d));
  } else {
    args = make_tuple(a.pos);
  }
  return text(percent_format(soft_str(v), args), v);
}

Value f_indent(Interp&, const Value& v, Args& a) {
  a.check("indent", 3, {"width", "first", "blank"});
  const Value& w = arg_or(a, 0, "width", Value::integer(4));
  std::string ind = w.kind == Kind::String ? w.str() : std::string(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(arg_int(w, "width"), 1 << 20))), ' ');
  bool first = arg_bool(a, 1, "first", false), blank = arg_bool(a, 2, "blank", false);
  std::string s = soft_str(v) + "\n";
  auto lines = py::splitlines(s, false);
  charge_bytes(lines.size() * ind.size());
  std::string rv;
  if (blank) {
    for (size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k];
  } else if (!lines.empty()) {
    rv = lines[0];
    for (size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : ind + lines[k]);
  }
  if (first) rv = ind + rv;
  return text(std::move(rv), v);
}

Value f_pprint(Interp&, const Value& v, Args&) { return Value::string(repr(v)); }

Value f_replace(Interp&, const Value& v, Args& a) {
  a.check("replace", 3, {"old", "new", "count"});
  const Value* o = a.get(0, "old");
  const Value* n = a.get(1, "new");
  if (!o || !n) raise("TypeError", "replace() missing required arguments 'old' and 'new'");
  const Value* c = a.get(2, "count");
  int64_t count = c && !c->is_none() ? arg_int(*c, "count") : -1;
  return text(py::replace(soft_str(v), soft_str(*o), soft_str(*n), count), v);
}

Value f_round(Interp&, const Value& v, Args& a) {
  a.check("round", 2, {"precision", "method"});
  int64_t prec = arg_int(arg_or(a, 0, "precision", Value::integer(0)), "precision");
  std::string method = "common";
  if (const Value* m = a.get(1, "method")) method = soft_str(*m);
  if (method != "common" && method != "ceil" && method != "floor")
    raise("FilterArgumentError", "method must be common, ceil or floor");
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number()) raise("TypeError", "type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.kind != Kind::Float) {
      if (prec >= 0) return Value::integer(v.as_int());
      double p = std::pow(10.0, static_cast<double>(-prec));
      return Value::integer(static_cast<int64_t>(std::nearbyint(static_cast<double>(v.as_int()) / p) * p));
    }
    if (std::isnan(v.f) || std::isinf(v.f)) return v;
    if (prec >= 0 && prec <= 320) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), v.f);
      return Value::number(std::strtod(buf, nullptr));
    }
    if (prec > 320) return v;
    double p = std::pow(10.0, static_cast<double>(-prec));
    return Value::number(std::nearbyint(v.f / p) * p);
  }
  double p = std::pow(10.0, static_cast<double>(prec));
  double x = v.as_double() * p;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / p);
}

Value f_tojson(Interp&, const Value& v, Args& a) {
  a.check("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
  DumpOptions opt;
  opt.ensure_ascii = arg_bool(a, 0, "ensure_ascii", false);
  if (const Value* ind = a.get(1, "indent"); ind && !ind->is_none()) {
    if (ind->kind == Kind::String) {
      opt.indent_is_str = true;
      opt.indent_str = ind->str();
    } else {
      opt.indent = static_cast<int>(std::clamp<int64_t>(arg_int(*ind, "indent"), 0, 1 << 16));
    }
  }
  if (const Value* sep = a.get(2, "separators"); sep && !sep->is_none()) {
    ValueList parts = iterate(*sep);
    if (parts.size() != 2) raise("ValueError", "separators must be a pair of strings");
    opt.item_sep = arg_str(parts[0], "separator");
    opt.key_sep = arg_str(parts[1], "separator");
    opt.custom_item_sep = true;
  }
  opt.sort_keys = arg_bool(a, 3, "sort_keys", false);
  return Value::string(json_dumps(v, opt));
}

Value f_trim(Interp&, const Value& v, Args& a) {
  a.check("trim", 1, {"chars"});
  const Value* c = a.get(0, "chars");
  std::string chars;
  if (c && !c->is_none()) chars = soft_str(*c);
  return text(py::strip(soft_str(v), c && !c->is_none() ? &chars : nullptr, true, true), v);
}

Value f_truncate(Interp&, const Value& v, Args& a) {
  a.check("truncate", 4, {"length", "killwords", "end", "leeway"});
  int64_t length = arg_int(arg_or(a, 0, "length", Value::integer(255)), "length");
  bool killwords = arg_bool(a, 1, "killwords", false);
  std::string end = "...";
  if (const Value* e = a.get(2, "end")) end = soft_str(*e);
  const Value* lw = a.get(3, "leeway");
  int64_t leeway = lw && !lw->is_none() ? arg_int(*lw, "leeway") : 5;
  int64_t end_len = static_cast<int64_t>(py::cp_len(end));
  if (length < end_len) raise("AssertionError", "expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (leeway < 0) raise("AssertionError", "expected leeway >= 0, got " + std::to_string(leeway));
  std::string s = soft_str(v);
  if (static_cast<int64_t>(py::cp_len(s)) <= length + leeway) return text(s, v);
  std::string head = s.substr(0, py::byte_offset(s, static_cast<size_t>(length - end_len)));
  if (!killwords) {
    size_t sp = head.rfind(' ');
    if (sp != std::string::npos) head = head.substr(0, sp);
  }
  return text(head + end, v);
}

Value f_wordcount(Interp&, const Value& v, Args&) {
  std::string s = soft_str(v);
  int64_t n = 0;
  bool in_word = false;
  for (size_t pos = 0; pos < s.size();) {
    uint32_t c = py::next_cp(s, pos);
    bool w = py::is_alpha(c) || py::is_digit(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

}  // namespace filt
}  // namespace tmill::jinja
