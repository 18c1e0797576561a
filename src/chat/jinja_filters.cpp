// Jinja2's built-in filters (jinja2/filters.py semantics), plus Hugging Face's tojson
// (json.dumps with ensure_ascii=False by default, Python separators, no HTML escaping).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>

#include "chat/jinja_interp.h"
#include "chat/jinja_pystr.h"

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

namespace {

using Args = CallArgs;

Value arg_or(const Args& a, size_t idx, std::string_view name, const Value& dflt) {
  const Value* v = a.get(idx, name);
  return v ? *v : dflt;
}

bool arg_bool(const Args& a, size_t idx, std::string_view name, bool dflt) {
  const Value* v = a.get(idx, name);
  return v ? truthy(*v) : dflt;
}

Value text(std::string s, const Value& like) { return Value::string(std::move(s), like.markup); }
std::string soft_str(const Value& v) { return v.kind == Kind::String ? v.str() : to_str(v); }

// make_attrgetter: "a.b.0" -> getitem chain (getitem falls back to attributes).
// `dflt` (map's default=) replaces an undefined result after each step, as Jinja does.
Value attr_get(Interp& in, const Value& item, const std::string& attribute, const Value* dflt = nullptr) {
  Value cur = item;
  size_t start = 0;
  while (start <= attribute.size()) {
    size_t dot = attribute.find('.', start);
    std::string part = attribute.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = in.getitem(cur, digits ? Value::integer(std::strtoll(part.c_str(), nullptr, 10)) : Value::string(part));
    if (dflt && !dflt->is_none() && cur.is_undefined()) cur = *dflt;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

Value lower_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.kind == Kind::String) return Value::string(py::lower(v.str()));
  return v;
}

// Key function for sort/unique/min/max/dictsort: attribute(s) + case folding.
std::function<Value(const Value&)> key_fn(Interp& in, const Args& a, size_t attr_idx, bool case_sensitive,
                                          bool multi) {
  const Value* attr = a.get(attr_idx, "attribute");
  if (!attr || attr->is_none()) return [case_sensitive](const Value& v) { return lower_key(v, case_sensitive); };
  std::string spec = attr->kind == Kind::String ? attr->str() : to_str(*attr);
  std::vector<std::string> parts;
  if (multi) {
    size_t start = 0;
    while (true) {
      size_t c = spec.find(',', start);
      parts.push_back(spec.substr(start, c == std::string::npos ? std::string::npos : c - start));
      if (c == std::string::npos) break;
      start = c + 1;
    }
  } else {
    parts.push_back(spec);
  }
  Interp* ip = &in;
  return [ip, parts, case_sensitive](const Value& v) {
    if (parts.size() == 1) return lower_key(attr_get(*ip, v, parts[0]), case_sensitive);
    ValueList keys;
    for (const auto& p : parts) keys.push_back(lower_key(attr_get(*ip, v, p), case_sensitive));
    return make_tuple(std::move(keys));
  };
}

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

Value f_attr(Interp& in, const Value& v, Args& a) {
  const Value* n = a.get(0, "name");
  if (!n || n->kind != Kind::String) raise("TypeError", "attr() requires an attribute name");
  if (v.kind == Kind::Dict) {
    Value out;
    if (builtin_attr(v, n->str(), out)) return out;
    return Value::undefined("'dict object' has no attribute '" + n->str() + "'");
  }
  return in.getattr(v, n->str());
}

Value f_batch(Interp&, const Value& v, Args& a) {
  int64_t n = arg_int(arg_or(a, 0, "linecount", Value::integer(0)), "linecount");
  if (n <= 0) raise("ValueError", "batch linecount must be positive");
  const Value* fill = a.get(1, "fill_with");
  ValueList out, tmp;
  for (auto& item : iterate(v)) {
    if (static_cast<int64_t>(tmp.size()) == n) {
      out.push_back(Value::list(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(std::move(item));
  }
  if (!tmp.empty()) {
    if (fill && !fill->is_none())
      while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(*fill);
    out.push_back(Value::list(std::move(tmp)));
  }
  return make_iterator(std::move(out));
}

Value f_slice(Interp&, const Value& v, Args& a) {
  int64_t slices = arg_int(arg_or(a, 0, "slices", Value::integer(0)), "slices");
  if (slices <= 0) raise("ZeroDivisionError", "integer division or modulo by zero");
  if (slices > 100000) raise("ValueError", "too many slices");
  const Value* fill = a.get(1, "fill_with");
  ValueList seq = iterate(v), out;
  int64_t len = static_cast<int64_t>(seq.size()), per = len / slices, extra = len % slices, offset = 0;
  for (int64_t k = 0; k < slices; ++k) {
    int64_t start = offset + k * per;
    if (k < extra) ++offset;
    int64_t end = offset + (k + 1) * per;
    ValueList tmp(seq.begin() + start, seq.begin() + end);
    if (fill && !fill->is_none() && k >= extra) tmp.push_back(*fill);
    out.push_back(Value::list(std::move(tmp)));
  }
  return make_iterator(std::move(out));
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

Value f_length(Interp&, const Value& v, Args&) {
  switch (v.kind) {
    case Kind::Undefined: return Value::integer(0);
    case Kind::String: return Value::integer(static_cast<int64_t>(py::cp_len(v.str())));
    case Kind::List: return Value::integer(static_cast<int64_t>(v.list_obj().items.size()));
    case Kind::Dict: return Value::integer(static_cast<int64_t>(v.dict_obj().items.size()));
    default: raise("TypeError", "object of type '" + type_name(v) + "' has no len()");
  }
}

Value f_default(Interp&, const Value& v, Args& a) {
  a.check("default", 2, {"default_value", "boolean"});
  static const Value empty = Value::string("");
  const Value& d = arg_or(a, 0, "default_value", empty);
  bool boolean = arg_bool(a, 1, "boolean", false);
  if (v.is_undefined() || (boolean && !truthy(v))) return d;
  return v;
}

Value f_dictsort(Interp& in, const Value& v, Args& a) {
  if (v.kind != Kind::Dict) raise("TypeError", "dictsort requires a mapping");
  bool cs = arg_bool(a, 0, "case_sensitive", false);
  std::string by = "key";
  if (const Value* b = a.get(1, "by")) by = arg_str(*b, "by");
  if (by != "key" && by != "value") raise("FilterArgumentError", "You can only sort by either \"key\" or \"value\"");
  bool rev = arg_bool(a, 2, "reverse", false);
  std::vector<std::pair<Value, Value>> items = v.dict_obj().items;
  size_t idx = by == "key" ? 0 : 1;
  charge_steps(items.size() * 8);
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    const Value& kx = idx ? x.second : x.first;
    const Value& ky = idx ? y.second : y.first;
    return rev ? py_less(lower_key(ky, cs), lower_key(kx, cs)) : py_less(lower_key(kx, cs), lower_key(ky, cs));
  });
  (void)in;
  ValueList out;
  for (auto& [k, val] : items) out.push_back(make_tuple({k, val}));
  return Value::list(std::move(out));
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

Value f_first(Interp&, const Value& v, Args&) {
  if (v.kind == Kind::Iterator) {
    auto& it = v.iter_obj();
    if (it.pos < it.items.size()) return it.items[it.pos++];
  } else {
    ValueList items = v.kind == Kind::String ? iterate(Value::string(v.str().substr(0, 4))) : iterate(v);
    if (!items.empty()) return items[0];
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value f_last(Interp&, const Value& v, Args&) {
  if (v.kind == Kind::Iterator) raise("TypeError", "'" + type_name(v) + "' object is not reversible");
  ValueList items = iterate(v);
  if (!items.empty()) return items.back();
  return Value::undefined("No last item, sequence was empty.");
}

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

Value f_items(Interp&, const Value& v, Args&) {
  if (v.is_undefined()) return make_iterator({});
  if (v.kind != Kind::Dict) raise("TypeError", "Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, x] : v.dict_obj().items) out.push_back(make_tuple({k, x}));
  return make_iterator(std::move(out));
}

Value f_join(Interp& in, const Value& v, Args& a) {
  a.check("join", 2, {"d", "attribute"});
  std::string sep;
  if (const Value* d = a.get(0, "d")) sep = soft_str(*d);
  const Value* attr = a.get(1, "attribute");
  ValueList items = iterate(v);
  std::string out;
  for (size_t k = 0; k < items.size(); ++k) {
    if (k) out += sep;
    out += soft_str(attr && !attr->is_none() ? attr_get(in, items[k], soft_str(*attr)) : items[k]);
  }
  return Value::string(std::move(out));
}

Value f_list(Interp&, const Value& v, Args&) { return Value::list(iterate(v)); }

Value f_map(Interp& in, const Value& v, Args& a) {
  if (!truthy(v)) return make_iterator({});
  ValueList items = iterate(v), out;
  if (a.pos.empty()) {
    const Value* attr = a.get(99, "attribute");
    if (!attr) raise("FilterArgumentError", "map requires a filter argument");
    const Value* dflt = a.get(99, "default");
    for (const auto& [k, x] : a.kw)
      if (k != "attribute" && k != "default") raise("FilterArgumentError", "Unexpected keyword argument '" + k + "'");
    std::string spec = soft_str(*attr);
    for (const auto& item : items) {
      out.push_back(attr_get(in, item, spec, dflt));
    }
  } else {
    std::string name = arg_str(a.pos[0], "map filter name");
    Args rest;
    rest.pos.assign(a.pos.begin() + 1, a.pos.end());
    rest.kw = a.kw;
    for (const auto& item : items) {
      Args copy = rest;
      out.push_back(in.call_filter(name, item, copy));
    }
  }
  return make_iterator(std::move(out));
}

Value select_impl(Interp& in, const Value& v, Args& a, bool attr_mode, bool want) {
  if (!truthy(v)) return make_iterator({});
  size_t off = 0;
  std::string attr;
  if (attr_mode) {
    if (a.pos.empty()) raise("FilterArgumentError", "Missing parameter for attribute name");
    attr = soft_str(a.pos[0]);
    off = 1;
  }
  std::optional<std::string> test;
  Args rest;
  if (a.pos.size() > off) {
    test = arg_str(a.pos[off], "test name");
    rest.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(off + 1), a.pos.end());
  }
  rest.kw = a.kw;
  ValueList out;
  for (const auto& item : iterate(v)) {
    Value x = attr_mode ? attr_get(in, item, attr) : item;
    bool r;
    if (test) {
      Args copy = rest;
      r = in.call_test(*test, x, copy);
    } else {
      r = truthy(x);
    }
    if (r == want) out.push_back(item);
  }
  return make_iterator(std::move(out));
}
Value f_select(Interp& in, const Value& v, Args& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interp& in, const Value& v, Args& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interp& in, const Value& v, Args& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interp& in, const Value& v, Args& a) { return select_impl(in, v, a, true, false); }

Value min_max(Interp& in, const Value& v, Args& a, bool want_max) {
  a.check(want_max ? "max" : "min", 2, {"case_sensitive", "attribute"});
  auto key = key_fn(in, a, 1, arg_bool(a, 0, "case_sensitive", false), false);
  ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t k = 1; k < items.size(); ++k) {
    Value kk = key(items[k]);
    if (want_max ? py_less(best_key, kk) : py_less(kk, best_key)) {
      best = k;
      best_key = kk;
    }
  }
  return items[best];
}
Value f_max(Interp& in, const Value& v, Args& a) { return min_max(in, v, a, true); }
Value f_min(Interp& in, const Value& v, Args& a) { return min_max(in, v, a, false); }

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

Value f_reverse(Interp&, const Value& v, Args&) {
  if (v.kind == Kind::String) {
    std::u32string u = py::decode(v.str());
    std::reverse(u.begin(), u.end());
    return text(py::encode(u), v);
  }
  if (v.kind == Kind::Iterator) {
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (v.kind == Kind::List || v.kind == Kind::Dict || v.is_undefined()) {
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return make_iterator(std::move(items), v.kind == Kind::Dict ? "dict_reversekeyiterator" : "list_reverseiterator");
  }
  raise("FilterArgumentError", "argument must be iterable");
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

Value f_sort(Interp& in, const Value& v, Args& a) {
  a.check("sort", 3, {"reverse", "case_sensitive", "attribute"});
  bool rev = arg_bool(a, 0, "reverse", false);
  auto key = key_fn(in, a, 2, arg_bool(a, 1, "case_sensitive", false), true);
  ValueList items = iterate(v);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t k = 0; k < items.size(); ++k) keyed.emplace_back(key(items[k]), k);
  charge_steps(items.size() * 8);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return rev ? py_less(y.first, x.first) : py_less(x.first, y.first);
  });
  ValueList out;
  for (auto& kv : keyed) out.push_back(items[kv.second]);
  return Value::list(std::move(out));
}

Value f_unique(Interp& in, const Value& v, Args& a) {
  a.check("unique", 2, {"case_sensitive", "attribute"});
  auto key = key_fn(in, a, 1, arg_bool(a, 0, "case_sensitive", false), false);
  ValueList seen, out;
  for (const auto& item : iterate(v)) {
    Value k = key(item);
    if (k.kind == Kind::Dict || (k.kind == Kind::List && !k.is_tuple()))
      raise("TypeError", "unhashable type: '" + type_name(k) + "'");
    charge_steps(seen.size());
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_eq(s, k); })) continue;
    seen.push_back(k);
    out.push_back(item);
  }
  return make_iterator(std::move(out));
}

Value f_sum(Interp& in, const Value& v, Args& a) {
  a.check("sum", 2, {"attribute", "start"});
  const Value* attr = a.get(0, "attribute");
  Value acc = arg_or(a, 1, "start", Value::integer(0));
  for (const auto& item : iterate(v)) {
    Value x = attr && !attr->is_none() ? attr_get(in, item, soft_str(*attr)) : item;
    if (x.is_undefined()) fail_undefined(x);
    if (!acc.is_number() || !x.is_number())
      raise("TypeError", "unsupported operand type(s) for +: '" + type_name(acc) + "' and '" + type_name(x) + "'");
    if (acc.kind != Kind::Float && x.kind != Kind::Float) {
      int64_t r;
      if (__builtin_add_overflow(acc.as_int(), x.as_int(), &r)) raise("OverflowError", "integer result too large (64-bit integers)");
      acc = Value::integer(r);
    } else {
      acc = Value::number(acc.as_double() + x.as_double());
    }
  }
  return acc;
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

Value f_groupby(Interp& in, const Value& v, Args& a) {
  a.check("groupby", 3, {"attribute", "default", "case_sensitive"});
  const Value* attr = a.get(0, "attribute");
  if (!attr) raise("TypeError", "groupby() missing required argument 'attribute'");
  const Value* dflt = a.get(1, "default");
  bool cs = arg_bool(a, 2, "case_sensitive", false);
  std::string spec = soft_str(*attr);
  auto key = [&](const Value& item) {
    Value r = attr_get(in, item, spec);
    if (dflt && !dflt->is_none() && r.is_undefined()) r = *dflt;
    return r;
  };
  ValueList items = iterate(v);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t k = 0; k < items.size(); ++k) keyed.emplace_back(key(items[k]), k);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return py_less(lower_key(x.first, cs), lower_key(y.first, cs));
  });
  ValueList groups;
  for (size_t k = 0; k < keyed.size();) {
    size_t e = k;
    ValueList members;
    while (e < keyed.size() && py_eq(lower_key(keyed[e].first, cs), lower_key(keyed[k].first, cs)))
      members.push_back(items[keyed[e++].second]);
    groups.push_back(make_tuple({keyed[k].first, Value::list(std::move(members))}));
    k = e;
  }
  return Value::list(std::move(groups));
}

const FilterFn kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},
    {"batch", f_batch},       {"capitalize", f_capitalize},
    {"center", f_center},     {"count", f_length},
    {"d", f_default},         {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},
    {"escape", f_escape},     {"first", f_first},
    {"float", f_float},       {"forceescape", f_forceescape},
    {"format", f_format},     {"groupby", f_groupby},
    {"indent", f_indent},     {"int", f_int},
    {"items", f_items},       {"join", f_join},
    {"last", f_last},         {"length", f_length},
    {"list", f_list},         {"lower", f_lower},
    {"map", f_map},           {"max", f_max},
    {"min", f_min},           {"pprint", f_pprint},
    {"reject", f_reject},     {"rejectattr", f_rejectattr},
    {"replace", f_replace},   {"reverse", f_reverse},
    {"round", f_round},       {"safe", f_safe},
    {"select", f_select},     {"selectattr", f_selectattr},
    {"slice", f_slice},       {"sort", f_sort},
    {"string", f_string},     {"sum", f_sum},
    {"title", f_title},       {"tojson", f_tojson},
    {"trim", f_trim},         {"truncate", f_truncate},
    {"unique", f_unique},     {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

const FilterFn* find_filter(std::string_view name) {
  for (const auto& f : kFilters)
    if (name == f.name) return &f;
  return nullptr;
}

}  // namespace tmill::jinja
