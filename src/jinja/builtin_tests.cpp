// Jinja2's built-in tests (`x is defined`, `x is divisibleby 3`, ...), with Python's type semantics:
// bool counts as a number, Undefined is iterable/callable (it defines __iter__/__call__), etc.
#include <cmath>

#include "jinja/interp.h"
#include "jinja/pystr.h"

namespace tmill::jinja {

namespace {

using Args = CallArgs;

const Value& arg0(const Args& a, const char* test) {
  if (a.pos.empty()) raise("TypeError", std::string(test) + "() missing 1 required positional argument");
  return a.pos[0];
}

Value py_mod(const Value& v, const Value& n) {
  if (v.is_undefined()) fail_undefined(v);
  if (n.is_undefined()) fail_undefined(n);
  if (!v.is_number() || !n.is_number()) {
    if (v.kind == Kind::String) raise("TypeError", "not all arguments converted during string formatting");
    raise("TypeError", "unsupported operand type(s) for %: '" + type_name(v) + "' and '" + type_name(n) + "'");
  }
  if (v.kind != Kind::Float && n.kind != Kind::Float) {
    int64_t x = v.as_int(), y = n.as_int();
    if (y == 0) raise("ZeroDivisionError", "integer modulo by zero");
    if (y == -1) return Value::integer(0);
    int64_t r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value::integer(r);
  }
  double y = n.as_double();
  if (y == 0) raise("ZeroDivisionError", "float modulo");
  double r = std::fmod(v.as_double(), y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return Value::number(r);
}

bool t_odd(Interp&, const Value& v, Args&) { return py_mod(v, Value::integer(2)).as_double() == 1; }
bool t_even(Interp&, const Value& v, Args&) { return py_mod(v, Value::integer(2)).as_double() == 0; }
bool t_divisibleby(Interp&, const Value& v, Args& a) { return py_mod(v, arg0(a, "divisibleby")).as_double() == 0; }
bool t_defined(Interp&, const Value& v, Args&) { return !v.is_undefined(); }
bool t_undefined(Interp&, const Value& v, Args&) { return v.is_undefined(); }
bool t_none(Interp&, const Value& v, Args&) { return v.is_none(); }
bool t_boolean(Interp&, const Value& v, Args&) { return v.kind == Kind::Bool; }
bool t_false(Interp&, const Value& v, Args&) { return v.kind == Kind::Bool && !v.b; }
bool t_true(Interp&, const Value& v, Args&) { return v.kind == Kind::Bool && v.b; }
bool t_integer(Interp&, const Value& v, Args&) { return v.kind == Kind::Int; }
bool t_float(Interp&, const Value& v, Args&) { return v.kind == Kind::Float; }
bool t_number(Interp&, const Value& v, Args&) { return v.is_number(); }
bool t_string(Interp&, const Value& v, Args&) { return v.kind == Kind::String; }
bool t_mapping(Interp&, const Value& v, Args&) { return v.kind == Kind::Dict; }
bool t_iterable(Interp&, const Value& v, Args&) {
  return v.kind == Kind::List || v.kind == Kind::Dict || v.kind == Kind::String || v.kind == Kind::Iterator ||
         v.is_undefined();
}
bool t_sequence(Interp&, const Value& v, Args&) {
  return (v.kind == Kind::List && (v.is_plain_list() || v.list_obj().seq == SeqKind::Range)) ||
         v.kind == Kind::Dict || v.kind == Kind::String || v.is_undefined();
}
bool t_callable(Interp&, const Value& v, Args&) {
  return v.is_undefined() || (v.kind == Kind::Object && v.o->callable());
}
bool t_escaped(Interp&, const Value& v, Args&) { return v.kind == Kind::String && v.markup; }
bool t_lower(Interp&, const Value& v, Args&) {
  std::string s = to_str(v);
  return py::lower(s) == s && py::upper(s) != s;
}
bool t_upper(Interp&, const Value& v, Args&) {
  std::string s = to_str(v);
  return py::upper(s) == s && py::lower(s) != s;
}

bool t_sameas(Interp&, const Value& v, Args& a) {
  const Value& o = arg0(a, "sameas");
  if (v.kind != o.kind) return false;
  switch (v.kind) {
    case Kind::Undefined: return v.s == o.s;
    case Kind::None: return true;
    case Kind::Bool: return v.b == o.b;
    case Kind::Int: return v.i == o.i && v.i >= -5 && v.i <= 256;  // CPython's small-int cache
    case Kind::Float: return false;
    case Kind::String: return v.s == o.s;
    default: return v.o == o.o;
  }
}

bool cmp(Interp& in, const char* op, const Value& v, Args& a) { return in.compare(op, v, arg0(a, op)); }
bool t_eq(Interp& in, const Value& v, Args& a) { return cmp(in, "==", v, a); }
bool t_ne(Interp& in, const Value& v, Args& a) { return cmp(in, "!=", v, a); }
bool t_lt(Interp& in, const Value& v, Args& a) { return cmp(in, "<", v, a); }
bool t_le(Interp& in, const Value& v, Args& a) { return cmp(in, "<=", v, a); }
bool t_gt(Interp& in, const Value& v, Args& a) { return cmp(in, ">", v, a); }
bool t_ge(Interp& in, const Value& v, Args& a) { return cmp(in, ">=", v, a); }
bool t_in(Interp& in, const Value& v, Args& a) { return in.contains(arg0(a, "in"), v); }
bool t_filter(Interp&, const Value& v, Args&) { return v.kind == Kind::String && find_filter(v.str()); }
bool t_test(Interp&, const Value& v, Args&) { return v.kind == Kind::String && find_test(v.str()); }

const TestFn kTests[] = {
    {"!=", t_ne},           {"<", t_lt},          {"<=", t_le},          {"==", t_eq},
    {">", t_gt},            {">=", t_ge},         {"boolean", t_boolean}, {"callable", t_callable},
    {"defined", t_defined}, {"divisibleby", t_divisibleby}, {"eq", t_eq},  {"equalto", t_eq},
    {"escaped", t_escaped}, {"even", t_even},     {"false", t_false},    {"filter", t_filter},
    {"float", t_float},     {"ge", t_ge},         {"greaterthan", t_gt}, {"gt", t_gt},
    {"in", t_in},           {"integer", t_integer}, {"iterable", t_iterable}, {"le", t_le},
    {"lessthan", t_lt},     {"lower", t_lower},   {"lt", t_lt},          {"mapping", t_mapping},
    {"ne", t_ne},           {"none", t_none},     {"number", t_number},  {"odd", t_odd},
    {"sameas", t_sameas},   {"sequence", t_sequence}, {"string", t_string}, {"test", t_test},
    {"true", t_true},       {"undefined", t_undefined}, {"upper", t_upper},
};

}  // namespace

const TestFn* find_test(std::string_view name) {
  for (const auto& t : kTests)
    if (name == t.name) return &t;
  return nullptr;
}

}  // namespace tmill::jinja
