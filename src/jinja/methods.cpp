// Python methods templates call on str/dict/list values and the sandbox's attribute rules.
#include <algorithm>
#include <cstring>

#include "jinja/interp.h"
#include "jinja/pystr.h"

namespace tmill::jinja {

const Value* CallArgs::get(size_t idx, std::string_view name) const {
  if (idx < pos.size()) return &pos[idx];
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

const Value& CallArgs::need(size_t idx, std::string_view name, std::string_view fn) const {
  const Value* v = get(idx, name);
  if (!v) raise("TypeError", std::string(fn) + "() missing required argument '" + std::string(name) + "'");
  return *v;
}

void CallArgs::check(std::string_view fn, size_t max_pos, std::initializer_list<std::string_view> names) const {
  if (pos.size() > max_pos)
    raise("TypeError", std::string(fn) + "() takes at most " + std::to_string(max_pos) + " argument(s) (" +
                           std::to_string(pos.size()) + " given)");
  for (const auto& [k, v] : kw) {
    size_t idx = 0;
    bool found = false;
    for (auto n : names) {
      if (n == k) {
        found = true;
        if (idx < pos.size())
          raise("TypeError", std::string(fn) + "() got multiple values for argument '" + k + "'");
      }
      ++idx;
    }
    if (!found) raise("TypeError", std::string(fn) + "() got an unexpected keyword argument '" + k + "'");
  }
}

std::string arg_str(const Value& v, std::string_view what) {
  if (v.kind != Kind::String) raise("TypeError", std::string(what) + " must be str, not " + type_name(v));
  return v.str();
}

int64_t arg_int(const Value& v, std::string_view what) {
  if (!v.is_int() || v.kind == Kind::Float)
    raise("TypeError", "'" + type_name(v) + "' object cannot be interpreted as an integer (" + std::string(what) + ")");
  return v.as_int();
}

Value make_tuple(ValueList items) { return Value::list(std::move(items), SeqKind::Tuple); }

ValueList iterate(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return {};
    case Kind::List: charge_steps(v.list_obj().items.size()); return v.list_obj().items;
    case Kind::Dict: {
      ValueList keys;
      for (const auto& kv : v.dict_obj().items) keys.push_back(kv.first);
      charge_steps(keys.size());
      return keys;
    }
    case Kind::String: {
      ValueList chars;
      const std::string& s = v.str();
      for (size_t pos = 0; pos < s.size();) {
        size_t b = pos;
        py::next_cp(s, pos);
        chars.push_back(Value::string(s.substr(b, pos - b), v.markup));
      }
      charge_steps(chars.size());
      return chars;
    }
    case Kind::Iterator: {
      ValueList rest = v.iter_obj().take_rest();
      charge_steps(rest.size());
      return rest;
    }
    default: raise("TypeError", "'" + type_name(v) + "' object is not iterable");
  }
}

namespace {

struct BoundMethod : Object {
  Value self;
  std::string name;
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override { return "<built-in method " + name + " of " + jinja::type_name(self) + " object>"; }
  bool callable() const override { return true; }
  Value call(Interp& in, CallArgs& args) override;
};

const char* const kStrMethods[] = {
    "capitalize", "casefold", "center", "count", "endswith", "find", "format", "index", "isalnum", "isalpha",
    "isdecimal", "isdigit", "islower", "isnumeric", "isspace", "istitle", "isupper", "join", "ljust", "lower",
    "lstrip", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition",
    "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "upper", "zfill"};
const char* const kDictMethods[] = {"copy", "get", "items", "keys", "values"};
const char* const kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
const char* const kListMethods[] = {"copy", "count", "index"};
const char* const kListUnsafe[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};

template <size_t N>
bool in_list(const char* const (&arr)[N], std::string_view name) {
  for (const char* s : arr)
    if (name == s) return true;
  return false;
}

Value bind(const Value& self, std::string_view name) {
  auto m = std::make_shared<BoundMethod>();
  m->self = self;
  m->name = std::string(name);
  return Value::object(std::move(m));
}

Value unsafe(const Value& self, std::string_view name) {
  Value u = Value::undefined("access to attribute '" + std::string(name) + "' of '" + type_name(self) +
                             "' object is unsafe.");
  u.security = true;
  return u;
}

// Code-point substring [start, end) with Python slice normalization (for find/count/startswith...).
std::string cp_range(const std::string& s, const CallArgs& a, size_t first_idx) {
  const Value* vs = a.get(first_idx, "start");
  const Value* ve = a.get(first_idx + 1, "end");
  if ((!vs || vs->is_none()) && (!ve || ve->is_none())) return s;
  int64_t n = static_cast<int64_t>(py::cp_len(s));
  auto norm = [&](const Value* v, int64_t dflt) {
    if (!v || v->is_none()) return dflt;
    int64_t x = arg_int(*v, "slice index");
    if (x < 0) x = std::max<int64_t>(0, x + n);
    return std::min(x, n);
  };
  int64_t b = norm(vs, 0), e = norm(ve, n);
  if (e <= b) return "";
  size_t bb = py::byte_offset(s, static_cast<size_t>(b)), eb = py::byte_offset(s, static_cast<size_t>(e));
  return s.substr(bb, eb - bb);
}

int64_t cp_offset_of_start(const std::string& s, const CallArgs& a, size_t idx) {
  const Value* vs = a.get(idx, "start");
  if (!vs || vs->is_none()) return 0;
  int64_t n = static_cast<int64_t>(py::cp_len(s)), x = arg_int(*vs, "slice index");
  if (x < 0) x = std::max<int64_t>(0, x + n);
  return std::min(x, n);
}

Value pad(const std::string& s, const CallArgs& a, char mode) {
  int64_t width = arg_int(a.need(0, "width", mode == 'c' ? "center" : mode == 'l' ? "ljust" : "rjust"), "width");
  std::string fill = " ";
  if (const Value* f = a.get(1, "fillchar")) {
    fill = arg_str(*f, "fillchar");
    if (py::cp_len(fill) != 1) raise("TypeError", "The fill character must be exactly one character long");
  }
  int64_t len = static_cast<int64_t>(py::cp_len(s));
  if (width <= len) return Value::string(s);
  int64_t total = width - len;
  charge_bytes(static_cast<uint64_t>(total) * fill.size());
  int64_t left = mode == 'l' ? 0 : mode == 'r' ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t k = 0; k < left; ++k) out += fill;
  out += s;
  for (int64_t k = 0; k < total - left; ++k) out += fill;
  return Value::string(std::move(out));
}

Value str_method(Interp& in, const Value& self, const std::string& name, CallArgs& a) {
  const std::string& s = self.str();
  auto opt_str = [&](size_t idx, const char* kw) -> std::optional<std::string> {
    const Value* v = a.get(idx, kw);
    if (!v || v->is_none()) return std::nullopt;
    return arg_str(*v, kw);
  };
  auto strs = [](std::vector<std::string> parts) {
    ValueList out;
    for (auto& p : parts) out.push_back(Value::string(std::move(p)));
    return Value::list(std::move(out));
  };
  if (name == "upper") return Value::string(py::upper(s));
  if (name == "lower" || name == "casefold") return Value::string(py::lower(s));
  if (name == "title") return Value::string(py::title(s));
  if (name == "capitalize") return Value::string(py::capitalize(s));
  if (name == "swapcase") return Value::string(py::swapcase(s));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    a.check(name, 1, {"chars"});
    auto chars = opt_str(0, "chars");
    return Value::string(py::strip(s, chars ? &*chars : nullptr, name != "rstrip", name != "lstrip"), self.markup);
  }
  if (name == "split" || name == "rsplit") {
    a.check(name, 2, {"sep", "maxsplit"});
    auto sep = opt_str(0, "sep");
    if (sep && sep->empty()) raise("ValueError", "empty separator");
    const Value* ms = a.get(1, "maxsplit");
    int64_t maxsplit = ms ? arg_int(*ms, "maxsplit") : -1;
    auto parts = py::split(s, sep ? &*sep : nullptr, maxsplit, name == "rsplit");
    charge_steps(parts.size());
    return strs(std::move(parts));
  }
  if (name == "splitlines") {
    const Value* ke = a.get(0, "keepends");
    return strs(py::splitlines(s, ke && truthy(*ke)));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* p = a.get(0, "prefix");
    if (!p) raise("TypeError", name + "() takes at least 1 argument (0 given)");
    std::string sub = cp_range(s, a, 1);
    auto test = [&](const Value& x) {
      std::string t = arg_str(x, name + " first arg");
      if (name == "startswith") return sub.compare(0, t.size(), t) == 0;
      return sub.size() >= t.size() && sub.compare(sub.size() - t.size(), t.size(), t) == 0;
    };
    if (p->is_tuple()) {
      for (const auto& x : p->list_obj().items)
        if (test(x)) return Value::boolean(true);
      return Value::boolean(false);
    }
    if (p->kind != Kind::String)
      raise("TypeError", name + " first arg must be str or a tuple of str, not " + type_name(*p));
    return Value::boolean(test(*p));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const Value* p = a.get(0, "sub");
    if (!p) raise("TypeError", name + "() takes at least 1 argument (0 given)");
    std::string sub = arg_str(*p, "must be str");
    std::string hay = cp_range(s, a, 1);
    if (name == "count") return Value::integer(static_cast<int64_t>(py::count(hay, sub)));
    size_t f = (name == "find" || name == "index") ? hay.find(sub) : hay.rfind(sub);
    if (f == std::string::npos) {
      if (name == "index" || name == "rindex") raise("ValueError", "substring not found");
      return Value::integer(-1);
    }
    return Value::integer(cp_offset_of_start(s, a, 1) + static_cast<int64_t>(py::cp_index(hay, f)));
  }
  if (name == "replace") {
    a.check(name, 3, {"old", "new", "count"});
    const Value* o = a.get(0, "old");
    const Value* n = a.get(1, "new");
    if (!o || !n) raise("TypeError", "replace() takes at least 2 arguments");
    const Value* c = a.get(2, "count");
    return Value::string(py::replace(s, arg_str(*o, "replace() argument 1"), arg_str(*n, "replace() argument 2"),
                                     c ? arg_int(*c, "count") : -1));
  }
  if (name == "join") {
    const Value* it = a.get(0, "iterable");
    if (!it) raise("TypeError", "join() takes exactly one argument (0 given)");
    ValueList items = iterate(*it);
    std::string out;
    for (size_t k = 0; k < items.size(); ++k) {
      if (items[k].kind != Kind::String)
        raise("TypeError", "sequence item " + std::to_string(k) + ": expected str instance, " + type_name(items[k]) +
                               " found");
      if (k) out += s;
      out += items[k].str();
    }
    return Value::string(std::move(out));
  }
  if (name == "center") return pad(s, a, 'c');
  if (name == "ljust") return pad(s, a, 'l');
  if (name == "rjust") return pad(s, a, 'r');
  if (name == "zfill") {
    int64_t width = arg_int(a.need(0, "width", "zfill"), "width"), len = static_cast<int64_t>(py::cp_len(s));
    if (width <= len) return Value::string(s);
    charge_bytes(static_cast<uint64_t>(width - len));
    size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
    return Value::string(s.substr(0, sign) + std::string(static_cast<size_t>(width - len), '0') + s.substr(sign));
  }
  if (name == "partition" || name == "rpartition") {
    std::string sep = arg_str(a.need(0, "sep", name), "sep");
    if (sep.empty()) raise("ValueError", "empty separator");
    size_t f = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (f == std::string::npos)
      return name == "partition" ? make_tuple({Value::string(s), Value::string(""), Value::string("")})
                                 : make_tuple({Value::string(""), Value::string(""), Value::string(s)});
    return make_tuple({Value::string(s.substr(0, f)), Value::string(sep), Value::string(s.substr(f + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    std::string t = arg_str(a.need(0, "affix", name), name);
    if (name == "removeprefix" && s.compare(0, t.size(), t) == 0) return Value::string(s.substr(t.size()));
    if (name == "removesuffix" && !t.empty() && s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0)
      return Value::string(s.substr(0, s.size() - t.size()));
    return Value::string(s);
  }
  if (name == "format") return Value::string(brace_format(s, a));
  if (name.rfind("is", 0) == 0) {
    std::u32string u = py::decode(s);
    if (u.empty()) return Value::boolean(false);
    auto all = [&](auto pred) { return std::all_of(u.begin(), u.end(), [&](char32_t c) { return pred(static_cast<uint32_t>(c)); }); };
    if (name == "isspace") return Value::boolean(all(py::is_space));
    if (name == "isalpha") return Value::boolean(all(py::is_alpha));
    if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") return Value::boolean(all(py::is_digit));
    if (name == "isalnum") return Value::boolean(all([](uint32_t c) { return py::is_alpha(c) || py::is_digit(c); }));
    bool any_cased = std::any_of(u.begin(), u.end(), [](char32_t c) { return py::is_upper(c) || py::is_lower(c); });
    if (name == "isupper") return Value::boolean(any_cased && all([](uint32_t c) { return !py::is_lower(c); }));
    if (name == "islower") return Value::boolean(any_cased && all([](uint32_t c) { return !py::is_upper(c); }));
    if (name == "istitle") return Value::boolean(any_cased && py::title(s) == s);
  }
  (void)in;
  raise("AttributeError", "'str' object has no attribute '" + name + "'");
}

Value BoundMethod::call(Interp& in, CallArgs& a) {
  if (self.kind == Kind::String) return str_method(in, self, name, a);
  if (self.kind == Kind::Dict) {
    const DictObj& d = self.dict_obj();
    if (name == "get") {
      a.check("get", 2, {});
      if (a.pos.empty()) raise("TypeError", "get expected at least 1 argument, got 0");
      const Value* v = d.find(a.pos[0]);
      return v ? *v : (a.pos.size() > 1 ? a.pos[1] : Value::none());
    }
    a.check(name, 0, {});
    ValueList out;
    charge_steps(d.items.size());
    if (name == "keys") {
      for (const auto& kv : d.items) out.push_back(kv.first);
      return Value::list(std::move(out), SeqKind::DictKeys);
    }
    if (name == "values") {
      for (const auto& kv : d.items) out.push_back(kv.second);
      return Value::list(std::move(out), SeqKind::DictValues);
    }
    if (name == "items") {
      for (const auto& kv : d.items) out.push_back(make_tuple({kv.first, kv.second}));
      return Value::list(std::move(out), SeqKind::DictItems);
    }
    auto copy = std::make_shared<DictObj>(d);
    return make_dict(std::move(copy));
  }
  // list / tuple
  const auto& items = self.list_obj().items;
  if (name == "copy") return Value::list(items, self.list_obj().seq);
  if (a.pos.size() != 1) raise("TypeError", name + "() takes exactly one argument");
  charge_steps(items.size());
  int64_t n = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    if (!py_eq(items[k], a.pos[0])) continue;
    if (name == "index") return Value::integer(static_cast<int64_t>(k));
    ++n;
  }
  if (name == "index") raise("ValueError", jinja::repr(a.pos[0]) + " is not in " + jinja::type_name(self));
  return Value::integer(n);
}

}  // namespace

bool builtin_attr(const Value& obj, std::string_view name, Value& out) {
  if (obj.kind == Kind::String) {
    if (!in_list(kStrMethods, name)) return false;
    out = bind(obj, name);
    return true;
  }
  if (obj.kind == Kind::Dict) {
    if (in_list(kDictMethods, name)) out = bind(obj, name);
    else if (in_list(kDictUnsafe, name)) out = unsafe(obj, name);
    else return false;
    return true;
  }
  if (obj.kind == Kind::List && obj.is_plain_list()) {
    if (name == "copy" && obj.is_tuple()) return false;
    if (in_list(kListMethods, name)) out = bind(obj, name);
    else if (!obj.is_tuple() && in_list(kListUnsafe, name)) out = unsafe(obj, name);
    else return false;
    return true;
  }
  return false;
}

}  // namespace tmill::jinja
