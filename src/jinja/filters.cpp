// Jinja2's built-in filters (jinja2/filters.py semantics): the sequence filters and the registry.
// Text/number filters are in filters_text.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>

#include "jinja/filters.h"
#include "jinja/pystr.h"

namespace tmill::jinja {

namespace filt {

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

}  // namespace filt

namespace {
using namespace filt;
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
