// Values of the Jinja interpreter. They model the Python objects Jinja2 templates see: Undefined, None,
// bool, int (int64), float, str (UTF-8, optionally Markup), list/tuple and the dict views, dict (insertion
// ordered), Namespace, one-shot iterators (generators) and opaque objects (macros, bound methods, loop).
// Containers are immutable once built (the sandbox Hugging Face renders with forbids mutation), so they
// are shared by pointer. Only Namespace attributes change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tmill::jinja {

// A Python exception raised while parsing or rendering, e.g. {"TypeError", "can only concatenate ..."}.
struct JinjaError : std::exception {
  std::string type;
  std::string message;
  int line = 0;  // template line, 0 when not known yet
  JinjaError(std::string t, std::string m, int l = 0) : type(std::move(t)), message(std::move(m)), line(l) {}
  const char* what() const noexcept override { return message.c_str(); }
};
[[noreturn]] void raise(std::string type, std::string message);

// Time/memory budget of one render. Every new string/container charges its size; loops, calls and linear
// scans charge steps. The active budget is per thread (set by the interpreter for the duration of a render).
struct Budget {
  uint64_t alloc_left = UINT64_MAX;
  uint64_t steps_left = UINT64_MAX;
  void charge(uint64_t bytes);
  void step(uint64_t n = 1);
};
Budget* current_budget();
void set_current_budget(Budget* b);
inline void charge_bytes(uint64_t n) {
  if (Budget* b = current_budget()) b->charge(n);
}
inline void charge_steps(uint64_t n) {
  if (Budget* b = current_budget()) b->step(n);
}

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Iterator, Object };
// What a List value is in Python terms (all are immutable sequences here).
enum class SeqKind : uint8_t { List, Tuple, DictKeys, DictValues, DictItems, Range };

// Deepest allowed container nesting (keeps recursive destruction/printing bounded).
constexpr uint32_t kMaxValueDepth = 200;

struct Value;
using ValueList = std::vector<Value>;
class Interp;
struct CallArgs;

struct Object {
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;
  virtual std::string repr() const;
  virtual bool callable() const { return false; }
  virtual Value call(Interp& in, CallArgs& args);
  // Attribute lookup (obj.name); false when there is no such attribute.
  virtual bool get_attr(std::string_view name, Value& out);
};

struct Value {
  Kind kind = Kind::Undefined;
  bool markup = false;    // String: Markup (already "safe") text
  bool security = false;  // Undefined: using it raises SecurityError (unsafe attribute)
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::shared_ptr<const std::string> s;  // String text; Undefined: message raised when it is used
  std::shared_ptr<Object> o;             // List/Dict/Namespace/Iterator/Object payload

  static Value undefined(std::string message = {});
  static Value none() { Value v; v.kind = Kind::None; return v; }
  static Value boolean(bool x) { Value v; v.kind = Kind::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.kind = Kind::Int; v.i = x; return v; }
  static Value number(double x) { Value v; v.kind = Kind::Float; v.f = x; return v; }
  static Value string(std::string x, bool markup = false);
  static Value list(ValueList items, SeqKind seq = SeqKind::List);
  static Value object(std::shared_ptr<Object> obj) { Value v; v.kind = Kind::Object; v.o = std::move(obj); return v; }

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_int() const { return kind == Kind::Int || kind == Kind::Bool; }  // Python: bool is an int
  bool is_number() const { return kind == Kind::Int || kind == Kind::Bool || kind == Kind::Float; }
  const std::string& str() const { return *s; }
  int64_t as_int() const { return kind == Kind::Bool ? (b ? 1 : 0) : i; }
  double as_double() const { return kind == Kind::Float ? f : static_cast<double>(as_int()); }
  struct ListObj& list_obj() const;
  struct DictObj& dict_obj() const;
  struct NamespaceObj& ns_obj() const;
  struct IterObj& iter_obj() const;
  bool is_tuple() const;
  bool is_plain_list() const;  // list or tuple (not a view)
};

struct ListObj : Object {
  ValueList items;
  SeqKind seq = SeqKind::List;
  uint32_t depth = 1;
  int64_t r_start = 0, r_stop = 0, r_step = 1;  // SeqKind::Range
  std::string type_name() const override;
  std::string repr() const override;
};

struct DictObj : Object {
  std::vector<std::pair<Value, Value>> items;
  std::unordered_map<std::string, size_t> str_index;  // index of string keys into items
  uint32_t depth = 1;
  std::string type_name() const override { return "dict"; }
  std::string repr() const override;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);  // builder only: later duplicates overwrite in place
};
Value make_dict(std::shared_ptr<DictObj> d);  // checks nesting depth

struct NamespaceObj : Object {
  std::vector<std::pair<std::string, Value>> attrs;
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value v);
};

// A one-shot iterator (Python generator): iterating consumes it.
struct IterObj : Object {
  ValueList items;
  size_t pos = 0;
  std::string name = "generator";
  std::string type_name() const override { return name; }
  std::string repr() const override;
  ValueList take_rest() {
    ValueList rest(items.begin() + static_cast<std::ptrdiff_t>(pos), items.end());
    pos = items.size();
    return rest;
  }
};
Value make_iterator(ValueList items, std::string name = "generator");

uint32_t value_depth(const Value& v);
std::string type_name(const Value& v);  // Python type name: "str", "int", "dict", "NoneType", ...
bool truthy(const Value& v);
std::string to_str(const Value& v);  // Python str()
std::string repr(const Value& v);    // Python repr()
bool py_eq(const Value& a, const Value& b);
// a < b with Python semantics; raises TypeError for unorderable types ("op" is used in the message).
bool py_less(const Value& a, const Value& b, const char* op = "<");
[[noreturn]] void fail_undefined(const Value& v);

// Conversions from/to JSON (context input).
Value from_json(const nlohmann::ordered_json& j);

struct DumpOptions {
  bool ensure_ascii = false;
  int indent = -1;  // < 0: none
  std::string indent_str;  // used when indent was given as a string
  bool indent_is_str = false;
  std::string item_sep;  // default ", " or "," with indent
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool custom_item_sep = false;
};
// Python json.dumps(v, ...); raises TypeError for values JSON can't represent.
std::string json_dumps(const Value& v, const DumpOptions& opt);

}  // namespace tmill::jinja
