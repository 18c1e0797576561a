#include "jinja/value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/pystr.h"

namespace tmill::jinja {

void raise(std::string type, std::string message) { throw JinjaError(std::move(type), std::move(message)); }

namespace {
thread_local Budget* g_budget = nullptr;
thread_local int g_repr_depth = 0;

// Bounds recursion in printing/comparing/serializing (Namespace chains can be deep or cyclic).
struct RecursionGuard {
  RecursionGuard() {
    if (++g_repr_depth > static_cast<int>(kMaxValueDepth) + 50) {
      --g_repr_depth;
      raise("RecursionError", "maximum recursion depth exceeded while handling a value");
    }
  }
  ~RecursionGuard() { --g_repr_depth; }
};
}  // namespace

Budget* current_budget() { return g_budget; }
void set_current_budget(Budget* b) { g_budget = b; }

void Budget::charge(uint64_t bytes) {
  if (bytes > alloc_left) {
    alloc_left = 0;
    raise("ResourceLimitError", "template rendering exceeded its memory budget");
  }
  alloc_left -= bytes;
}

void Budget::step(uint64_t n) {
  if (n > steps_left) {
    steps_left = 0;
    raise("ResourceLimitError", "template rendering exceeded its step budget (runaway loop?)");
  }
  steps_left -= n;
}

std::string Object::repr() const { return "<" + type_name() + " object>"; }
Value Object::call(Interp&, CallArgs&) { raise("TypeError", "'" + type_name() + "' object is not callable"); }
bool Object::get_attr(std::string_view, Value&) { return false; }

Value Value::undefined(std::string message) {
  Value v;
  if (!message.empty()) v.s = std::make_shared<const std::string>(std::move(message));
  return v;
}

Value Value::string(std::string x, bool markup) {
  charge_bytes(x.size() + 32);
  Value v;
  v.kind = Kind::String;
  v.markup = markup;
  v.s = std::make_shared<const std::string>(std::move(x));
  return v;
}

uint32_t value_depth(const Value& v) {
  switch (v.kind) {
    case Kind::List: return v.list_obj().depth;
    case Kind::Dict: return v.dict_obj().depth;
    case Kind::Iterator: return 1;  // items are counted when the iterator is built
    default: return 0;
  }
}

static uint32_t checked_depth(const ValueList& items) {
  uint32_t d = 0;
  for (const auto& x : items) d = std::max(d, value_depth(x));
  if (d + 1 > kMaxValueDepth) raise("ResourceLimitError", "value nesting too deep");
  return d + 1;
}

Value Value::list(ValueList items, SeqKind seq) {
  charge_bytes(items.size() * sizeof(Value) + 64);
  auto obj = std::make_shared<ListObj>();
  obj->depth = checked_depth(items);
  obj->items = std::move(items);
  obj->seq = seq;
  Value v;
  v.kind = Kind::List;
  v.o = std::move(obj);
  return v;
}

Value make_dict(std::shared_ptr<DictObj> d) {
  charge_bytes(d->items.size() * (2 * sizeof(Value) + 16) + 64);
  uint32_t depth = 0;
  for (const auto& [k, v] : d->items) depth = std::max({depth, value_depth(k), value_depth(v)});
  if (depth + 1 > kMaxValueDepth) raise("ResourceLimitError", "value nesting too deep");
  d->depth = depth + 1;
  Value v;
  v.kind = Kind::Dict;
  v.o = std::move(d);
  return v;
}

Value make_iterator(ValueList items, std::string name) {
  charge_bytes(items.size() * sizeof(Value) + 64);
  checked_depth(items);
  auto obj = std::make_shared<IterObj>();
  obj->items = std::move(items);
  obj->name = std::move(name);
  Value v;
  v.kind = Kind::Iterator;
  v.o = std::move(obj);
  return v;
}

ListObj& Value::list_obj() const { return static_cast<ListObj&>(*o); }
DictObj& Value::dict_obj() const { return static_cast<DictObj&>(*o); }
NamespaceObj& Value::ns_obj() const { return static_cast<NamespaceObj&>(*o); }
IterObj& Value::iter_obj() const { return static_cast<IterObj&>(*o); }
bool Value::is_tuple() const { return kind == Kind::List && list_obj().seq == SeqKind::Tuple; }
bool Value::is_plain_list() const {
  return kind == Kind::List && (list_obj().seq == SeqKind::List || list_obj().seq == SeqKind::Tuple);
}

std::string ListObj::type_name() const {
  switch (seq) {
    case SeqKind::List: return "list";
    case SeqKind::Tuple: return "tuple";
    case SeqKind::DictKeys: return "dict_keys";
    case SeqKind::DictValues: return "dict_values";
    case SeqKind::DictItems: return "dict_items";
    case SeqKind::Range: return "range";
  }
  return "list";
}

static std::string join_repr(const ValueList& items) {
  std::string out;
  for (size_t k = 0; k < items.size(); ++k) {
    if (k) out += ", ";
    out += repr(items[k]);
  }
  return out;
}

std::string ListObj::repr() const {
  RecursionGuard guard;
  switch (seq) {
    case SeqKind::List: return "[" + join_repr(items) + "]";
    case SeqKind::Tuple: return items.size() == 1 ? "(" + jinja::repr(items[0]) + ",)" : "(" + join_repr(items) + ")";
    case SeqKind::Range:
      return r_step == 1 ? "range(" + std::to_string(r_start) + ", " + std::to_string(r_stop) + ")"
                         : "range(" + std::to_string(r_start) + ", " + std::to_string(r_stop) + ", " +
                               std::to_string(r_step) + ")";
    default: return type_name() + "([" + join_repr(items) + "])";
  }
}

const Value* DictObj::find(std::string_view key) const {
  auto it = str_index.find(std::string(key));
  return it == str_index.end() ? nullptr : &items[it->second].second;
}

const Value* DictObj::find(const Value& key) const {
  if (key.kind == Kind::String) return find(std::string_view(key.str()));
  charge_steps(items.size());
  for (const auto& [k, v] : items)
    if (k.kind != Kind::String && py_eq(k, key)) return &v;
  return nullptr;
}

void DictObj::set(Value key, Value value) {
  if (key.kind == Kind::String) {
    auto [it, inserted] = str_index.emplace(key.str(), items.size());
    if (!inserted) {
      items[it->second].second = std::move(value);
      return;
    }
  } else {
    for (auto& kv : items)
      if (kv.first.kind != Kind::String && py_eq(kv.first, key)) {
        kv.second = std::move(value);
        return;
      }
  }
  items.emplace_back(std::move(key), std::move(value));
}

std::string DictObj::repr() const {
  RecursionGuard guard;
  std::string out = "{";
  for (size_t k = 0; k < items.size(); ++k) {
    if (k) out += ", ";
    out += jinja::repr(items[k].first) + ": " + jinja::repr(items[k].second);
  }
  return out + "}";
}

const Value* NamespaceObj::find(std::string_view name) const {
  for (const auto& [k, v] : attrs)
    if (k == name) return &v;
  return nullptr;
}

void NamespaceObj::set(const std::string& name, Value v) {
  for (auto& kv : attrs)
    if (kv.first == name) {
      kv.second = std::move(v);
      return;
    }
  attrs.emplace_back(name, std::move(v));
}

std::string NamespaceObj::repr() const {
  RecursionGuard guard;
  std::string out = "<Namespace {";
  for (size_t k = 0; k < attrs.size(); ++k) {
    if (k) out += ", ";
    out += py::repr_str(attrs[k].first) + ": " + jinja::repr(attrs[k].second);
  }
  return out + "}>";
}

std::string IterObj::repr() const { return "<" + name + " object>"; }

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return v.markup ? "Markup" : "str";
    default: return v.o->type_name();
  }
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return v.b;
    case Kind::Int: return v.i != 0;
    case Kind::Float: return v.f != 0.0;
    case Kind::String: return !v.str().empty();
    case Kind::List: return !v.list_obj().items.empty();
    case Kind::Dict: return !v.dict_obj().items.empty();
    default: return true;
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "";
    case Kind::String: return v.str();
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "None";
    case Kind::Bool: return v.b ? "True" : "False";
    case Kind::Int: return std::to_string(v.i);
    case Kind::Float: return py::float_repr(v.f);
    case Kind::String: return v.markup ? "Markup(" + py::repr_str(v.str()) + ")" : py::repr_str(v.str());
    default: return v.o->repr();
  }
}

bool py_eq(const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::None: return true;
    case Kind::String: return a.str() == b.str();
    case Kind::List: {
      const auto &la = a.list_obj(), &lb = b.list_obj();
      if (la.seq != lb.seq || la.items.size() != lb.items.size()) return false;
      RecursionGuard guard;
      charge_steps(la.items.size());
      for (size_t k = 0; k < la.items.size(); ++k)
        if (!py_eq(la.items[k], lb.items[k])) return false;
      return true;
    }
    case Kind::Dict: {
      const auto &da = a.dict_obj(), &db = b.dict_obj();
      if (da.items.size() != db.items.size()) return false;
      RecursionGuard guard;
      charge_steps(da.items.size());
      for (const auto& [k, v] : da.items) {
        const Value* other = db.find(k);
        if (!other || !py_eq(v, *other)) return false;
      }
      return true;
    }
    default: return a.o == b.o;
  }
}

bool py_less(const Value& a, const Value& b, const char* op) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.kind == Kind::String && b.kind == Kind::String) return a.str() < b.str();
  if (a.kind == Kind::List && b.kind == Kind::List && a.list_obj().seq == b.list_obj().seq &&
      (a.list_obj().seq == SeqKind::List || a.list_obj().seq == SeqKind::Tuple)) {
    const auto &la = a.list_obj().items, &lb = b.list_obj().items;
    RecursionGuard guard;
    charge_steps(std::min(la.size(), lb.size()));
    for (size_t k = 0; k < la.size() && k < lb.size(); ++k)
      if (!py_eq(la[k], lb[k])) return py_less(la[k], lb[k], op);
    return la.size() < lb.size();
  }
  raise("TypeError", std::string("'") + op + "' not supported between instances of '" + type_name(a) + "' and '" +
                         type_name(b) + "'");
}

void fail_undefined(const Value& v) {
  std::string msg = v.s ? *v.s : "value is undefined";
  raise(v.security ? "SecurityError" : "UndefinedError", msg);
}

static Value from_json_depth(const nlohmann::ordered_json& j, uint32_t depth) {
  if (depth > kMaxValueDepth) raise("ValueError", "context JSON nested too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json_depth(x, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      auto d = std::make_shared<DictObj>();
      for (auto it = j.begin(); it != j.end(); ++it)
        d->set(Value::string(it.key()), from_json_depth(it.value(), depth + 1));
      return make_dict(std::move(d));
    }
    default: return Value::none();  // binary/discarded: not produced by JSON text
  }
}

Value from_json(const nlohmann::ordered_json& j) { return from_json_depth(j, 0); }

// ---- json.dumps ----

static void dump_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t pos = 0; pos < s.size();) {
    size_t start = pos;
    uint32_t c = py::next_cp(s, pos);
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (ensure_ascii && c >= 0x80) {
      if (c >= 0x10000) {
        uint32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
      }
      out += buf;
    } else {
      out.append(s.substr(start, pos - start));
    }
  }
  out += '"';
}

static std::string dump_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return py::float_repr(d);
}

static void dump_newline(std::string& out, const DumpOptions& opt, int level) {
  out += '\n';
  for (int k = 0; k < level; ++k) {
    if (opt.indent_is_str) out += opt.indent_str;
    else out.append(static_cast<size_t>(opt.indent), ' ');
  }
}

static void dump_value(std::string& out, const Value& v, const DumpOptions& opt, int level) {
  bool pretty = opt.indent >= 0 || opt.indent_is_str;
  const std::string& item_sep = opt.item_sep;
  switch (v.kind) {
    case Kind::None: out += "null"; return;
    case Kind::Bool: out += v.b ? "true" : "false"; return;
    case Kind::Int: out += std::to_string(v.i); return;
    case Kind::Float: out += dump_float(v.f); return;
    case Kind::String: dump_string(out, v.str(), opt.ensure_ascii); return;
    case Kind::List:
      if (v.is_plain_list()) {
        RecursionGuard guard;
        const auto& items = v.list_obj().items;
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t k = 0; k < items.size(); ++k) {
          if (k) out += item_sep;
          if (pretty) dump_newline(out, opt, level + 1);
          dump_value(out, items[k], opt, level + 1);
        }
        if (pretty) dump_newline(out, opt, level);
        out += ']';
        charge_steps(items.size());
        return;
      }
      break;
    case Kind::Dict: {
      RecursionGuard guard;
      std::vector<const std::pair<Value, Value>*> items;
      for (const auto& kv : v.dict_obj().items) items.push_back(&kv);
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (opt.sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](const auto* a, const auto* b) { return py_less(a->first, b->first); });
      out += '{';
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep;
        if (pretty) dump_newline(out, opt, level + 1);
        const Value& key = items[k]->first;
        switch (key.kind) {
          case Kind::String: dump_string(out, key.str(), opt.ensure_ascii); break;
          case Kind::None: out += "\"null\""; break;
          case Kind::Bool: out += key.b ? "\"true\"" : "\"false\""; break;
          case Kind::Int: out += "\"" + std::to_string(key.i) + "\""; break;
          case Kind::Float: out += "\"" + dump_float(key.f) + "\""; break;
          default: raise("TypeError", "keys must be str, int, float, bool or None, not " + type_name(key));
        }
        out += opt.key_sep;
        dump_value(out, items[k]->second, opt, level + 1);
      }
      if (pretty) dump_newline(out, opt, level);
      out += '}';
      charge_steps(items.size());
      return;
    }
    default: break;
  }
  raise("TypeError", "Object of type " + type_name(v) + " is not JSON serializable");
}

std::string json_dumps(const Value& v, const DumpOptions& opt) {
  DumpOptions o = opt;
  if (!o.custom_item_sep) o.item_sep = (o.indent >= 0 || o.indent_is_str) ? "," : ", ";
  std::string out;
  dump_value(out, v, o, 0);
  return out;
}

}  // namespace tmill::jinja
