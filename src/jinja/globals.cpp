// Global functions of the template environment: range (sandbox-limited), dict, namespace, joiner,
// cycler, and Hugging Face's raise_exception / strftime_now.
#include <functional>

#include "jinja/interp.h"

namespace tmill::jinja {

namespace {

struct BuiltinFn : Object {
  std::string name;
  Value (*fn)(Interp&, CallArgs&);
  BuiltinFn(std::string n, Value (*f)(Interp&, CallArgs&)) : name(std::move(n)), fn(f) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override { return "<built-in function " + name + ">"; }
  bool callable() const override { return true; }
  Value call(Interp& in, CallArgs& args) override { return fn(in, args); }
};

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Value g_range(Interp&, CallArgs& a) {
  if (!a.kw.empty()) raise("TypeError", "range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3) raise("TypeError", "range expected 1 to 3 arguments");
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = arg_int(a.pos[0], "range");
  } else {
    start = arg_int(a.pos[0], "range");
    stop = arg_int(a.pos[1], "range");
    if (a.pos.size() == 3) step = arg_int(a.pos[2], "range");
  }
  if (step == 0) raise("ValueError", "range() arg 3 must not be zero");
  int64_t n = 0;
  if (step > 0 && start < stop) n = (stop - start - 1) / step + 1;
  if (step < 0 && start > stop) n = (start - stop - 1) / (-step) + 1;
  if (n > kMaxRange)
    raise("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  ValueList items;
  for (int64_t k = 0; k < n; ++k) items.push_back(Value::integer(start + k * step));
  Value v = Value::list(std::move(items), SeqKind::Range);
  auto& l = v.list_obj();
  l.r_start = start;
  l.r_stop = stop;
  l.r_step = step;
  return v;
}

void fill_dict_like(CallArgs& a, const std::function<void(Value, Value)>& put, const char* fn) {
  if (a.pos.size() > 1) raise("TypeError", std::string(fn) + " expected at most 1 argument, got " + std::to_string(a.pos.size()));
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.kind == Kind::Dict) {
      for (const auto& [k, v] : src.dict_obj().items) put(k, v);
    } else if (src.kind == Kind::Namespace) {
      for (const auto& [k, v] : src.ns_obj().attrs) put(Value::string(k), v);
    } else {
      for (const auto& item : iterate(src)) {
        ValueList kv = iterate(item);
        if (kv.size() != 2) raise("ValueError", "dictionary update sequence element has wrong length");
        put(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.kw) put(Value::string(k), v);
}

Value g_dict(Interp&, CallArgs& a) {
  auto d = std::make_shared<DictObj>();
  fill_dict_like(a, [&](Value k, Value v) { d->set(std::move(k), std::move(v)); }, "dict");
  return make_dict(std::move(d));
}

Value g_namespace(Interp& in, CallArgs& a) {
  auto ns = std::make_shared<NamespaceObj>();
  fill_dict_like(a, [&](Value k, Value v) {
    if (k.kind != Kind::String) raise("TypeError", "keywords must be strings");
    ns->set(k.str(), std::move(v));
  }, "namespace");
  in.register_namespace(ns);
  Value v;
  v.kind = Kind::Namespace;
  v.o = std::move(ns);
  return v;
}

Value g_raise_exception(Interp&, CallArgs& a) {
  raise("TemplateError", a.pos.empty() ? std::string() : to_str(a.pos[0]));
}

Value g_strftime_now(Interp& in, CallArgs& a) {
  if (a.pos.size() != 1 || a.pos[0].kind != Kind::String) raise("TypeError", "strftime_now() expects one format string");
  return Value::string(py_strftime(a.pos[0].str(), in.now()));
}

struct Joiner : Object {
  std::string sep;
  bool used = false;
  std::string type_name() const override { return "Joiner"; }
  bool callable() const override { return true; }
  Value call(Interp&, CallArgs&) override {
    if (!used) {
      used = true;
      return Value::string("");
    }
    return Value::string(sep);
  }
};

Value g_joiner(Interp&, CallArgs& a) {
  auto j = std::make_shared<Joiner>();
  const Value* s = a.get(0, "sep");
  j->sep = s ? to_str(*s) : ", ";
  return Value::object(std::move(j));
}

struct Cycler : Object, std::enable_shared_from_this<Cycler> {
  ValueList items;
  size_t pos = 0;
  std::string type_name() const override { return "Cycler"; }
  bool get_attr(std::string_view name, Value& out) override;
};

struct CyclerMethod : Object {
  std::shared_ptr<Cycler> c;
  bool reset;
  std::string type_name() const override { return "method"; }
  bool callable() const override { return true; }
  Value call(Interp&, CallArgs&) override {
    if (reset) {
      c->pos = 0;
      return Value::none();
    }
    Value v = c->items[c->pos];
    c->pos = (c->pos + 1) % c->items.size();
    return v;
  }
};

bool Cycler::get_attr(std::string_view name, Value& out) {
  if (name == "current") {
    out = items[pos];
    return true;
  }
  if (name == "next" || name == "reset") {
    auto m = std::make_shared<CyclerMethod>();
    m->c = shared_from_this();
    m->reset = name == "reset";
    out = Value::object(std::move(m));
    return true;
  }
  return false;
}

Value g_cycler(Interp&, CallArgs& a) {
  if (a.pos.empty()) raise("RuntimeError", "at least one item has to be provided");
  auto c = std::make_shared<Cycler>();
  c->items = a.pos;
  return Value::object(std::move(c));
}

}  // namespace

std::vector<std::pair<std::string, Value>> make_globals() {
  std::vector<std::pair<std::string, Value>> g;
  auto add = [&](const char* n, Value (*f)(Interp&, CallArgs&)) {
    g.emplace_back(n, Value::object(std::make_shared<BuiltinFn>(n, f)));
  };
  add("range", g_range);
  add("dict", g_dict);
  add("namespace", g_namespace);
  add("raise_exception", g_raise_exception);
  add("strftime_now", g_strftime_now);
  add("joiner", g_joiner);
  add("cycler", g_cycler);
  return g;
}

}  // namespace tmill::jinja
