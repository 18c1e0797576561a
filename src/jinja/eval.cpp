// Expression evaluation: operators with Python semantics, attribute/item access with the
// sandbox's rules (jinja2.sandbox.ImmutableSandboxedEnvironment), calls, filters and tests.
#include <cmath>

#include "jinja/interp.h"
#include "jinja/pystr.h"

namespace tmill::jinja {

std::string html_escape(std::string_view s);  // filters.cpp

namespace {

std::string obj_repr_for_msg(const Value& obj) {
  if (obj.is_none()) return "None";
  return type_name(obj) + " object";
}

Value no_attr(const Value& obj, std::string_view name) {
  return Value::undefined("'" + obj_repr_for_msg(obj) + "' has no attribute '" + std::string(name) + "'");
}

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  raise("TypeError", "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

// Python slice index normalization for a sequence of length n.
void slice_indices(int64_t n, const Value& vstart, const Value& vstop, int64_t step, int64_t& start, int64_t& stop) {
  int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
  auto norm = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t x = v.as_int();
    if (x < 0) {
      x += n;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  start = norm(vstart, step > 0 ? lower : upper);
  stop = norm(vstop, step > 0 ? upper : lower);
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) raise("OverflowError", "integer result too large (64-bit integers)");
  return r;
}

Value repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.kind == Kind::String) {
    charge_bytes(static_cast<uint64_t>(n) * seq.str().size());
    std::string out;
    out.reserve(static_cast<size_t>(n) * seq.str().size());
    for (int64_t k = 0; k < n; ++k) out += seq.str();
    return Value::string(std::move(out), seq.markup);
  }
  const auto& items = seq.list_obj().items;
  charge_bytes(static_cast<uint64_t>(n) * items.size() * sizeof(Value));
  ValueList out;
  for (int64_t k = 0; k < n; ++k) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.list_obj().seq);
}

}  // namespace

Value Interp::eval(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case EK::Const: return e.value;
    case EK::Name: {
      if (const Value* v = scope->find(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    default: break;
  }
  DepthGuard guard(*this);
  line_ = e.line;
  switch (e.kind) {
    case EK::List:
    case EK::Tuple: {
      ValueList items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, scope));
      return Value::list(std::move(items), e.kind == EK::Tuple ? SeqKind::Tuple : SeqKind::List);
    }
    case EK::Dict: {
      auto d = std::make_shared<DictObj>();
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        Value key = eval(*e.args[k], scope);
        if (key.kind == Kind::List && !key.is_tuple()) raise("TypeError", "unhashable type: '" + type_name(key) + "'");
        if (key.kind == Kind::Dict || key.kind == Kind::Namespace)
          raise("TypeError", "unhashable type: '" + type_name(key) + "'");
        d->set(std::move(key), eval(*e.args[k + 1], scope));
      }
      return make_dict(std::move(d));
    }
    case EK::GetAttr: return getattr(eval(*e.args[0], scope), e.name);
    case EK::GetItem: {
      Value obj = eval(*e.args[0], scope);
      if (e.args[1]->kind == EK::Slice) return eval_slice(obj, *e.args[1], scope);
      return getitem(obj, eval(*e.args[1], scope));
    }
    case EK::Slice: raise("TypeError", "slices are only allowed in subscripts");
    case EK::Call: {
      Value callee = eval(*e.args[0], scope);
      CallArgs args;
      eval_args(*e.call, scope, args);
      line_ = e.line;
      return call(callee, args);
    }
    case EK::Filter: {
      Value base = eval(*e.args[0], scope);
      CallArgs args;
      eval_args(*e.call, scope, args);
      line_ = e.line;
      if (!e.filter) raise("TemplateRuntimeError", "No filter named '" + e.name + "' found.");
      return e.filter->fn(*this, base, args);
    }
    case EK::Test: {
      Value v = eval(*e.args[0], scope);
      CallArgs args;
      eval_args(*e.call, scope, args);
      line_ = e.line;
      if (!e.test) raise("TemplateRuntimeError", "No test named '" + e.name + "' found.");
      return Value::boolean(e.test->fn(*this, v, args));
    }
    case EK::Neg:
    case EK::Pos: {
      Value v = eval(*e.args[0], scope);
      if (v.is_undefined()) fail_undefined(v);
      const char* op = e.kind == EK::Neg ? "-" : "+";
      if (v.kind == Kind::Float) return Value::number(e.kind == EK::Neg ? -v.f : v.f);
      if (v.is_int()) {
        int64_t x = v.as_int();
        if (e.kind == EK::Neg && x == INT64_MIN) raise("OverflowError", "integer result too large (64-bit integers)");
        return Value::integer(e.kind == EK::Neg ? -x : x);
      }
      raise("TypeError", std::string("bad operand type for unary ") + op + ": '" + type_name(v) + "'");
    }
    case EK::Not: return Value::boolean(!truthy(eval(*e.args[0], scope)));
    case EK::BinOp: {
      Value a = eval(*e.args[0], scope);
      Value b = eval(*e.args[1], scope);
      line_ = e.line;
      return binop(e.name, a, b);
    }
    case EK::Concat: {
      std::string out;
      for (const auto& a : e.args) {
        Value v = eval(*a, scope);
        if (v.kind == Kind::String) out += v.str();
        else out += to_str(v);
      }
      return Value::string(std::move(out));
    }
    case EK::And: {
      Value a = eval(*e.args[0], scope);
      return truthy(a) ? eval(*e.args[1], scope) : a;
    }
    case EK::Or: {
      Value a = eval(*e.args[0], scope);
      return truthy(a) ? a : eval(*e.args[1], scope);
    }
    case EK::Compare: {
      Value left = eval(*e.args[0], scope);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.args[k + 1], scope);
        line_ = e.line;
        if (!compare(e.ops[k], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case EK::CondExpr: {
      if (truthy(eval(*e.args[1], scope))) return eval(*e.args[0], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    default: break;
  }
  raise("TemplateRuntimeError", "unknown expression");
}

void Interp::eval_args(const CallSpec& spec, const ScopePtr& scope, CallArgs& out) {
  for (const auto& a : spec.pos) out.pos.push_back(eval(*a, scope));
  for (const auto& [k, a] : spec.kw) out.kw.emplace_back(k, eval(*a, scope));
  if (spec.dyn_args) {
    Value extra = eval(*spec.dyn_args, scope);
    for (auto& v : iterate(extra)) out.pos.push_back(std::move(v));
  }
  if (spec.dyn_kwargs) {
    Value extra = eval(*spec.dyn_kwargs, scope);
    if (extra.kind != Kind::Dict) raise("TypeError", "argument after ** must be a mapping, not " + type_name(extra));
    for (const auto& [k, v] : extra.dict_obj().items) {
      if (k.kind != Kind::String) raise("TypeError", "keywords must be strings");
      out.kw.emplace_back(k.str(), v);
    }
  }
}

Value Interp::eval_slice(const Value& obj, const Expr& sl, const ScopePtr& scope) {
  Value parts[3];
  for (int k = 0; k < 3; ++k) parts[k] = sl.args[k] ? eval(*sl.args[k], scope) : Value::none();
  if (obj.is_undefined()) fail_undefined(obj);
  for (const auto& p : parts)
    if (!p.is_none() && !p.is_int()) return Value::undefined("invalid slice");
  int64_t step = parts[2].is_none() ? 1 : parts[2].as_int();
  if (step == 0) raise("ValueError", "slice step cannot be zero");
  auto pick = [&](int64_t n, auto&& take) {
    int64_t start, stop;
    slice_indices(n, parts[0], parts[1], step, start, stop);
    charge_steps(static_cast<uint64_t>(std::max<int64_t>(0, step > 0 ? stop - start : start - stop)) / std::abs(step) + 1);
    if (step > 0)
      for (int64_t i = start; i < stop; i += step) take(static_cast<size_t>(i));
    else
      for (int64_t i = start; i > stop; i += step) take(static_cast<size_t>(i));
  };
  if (obj.kind == Kind::String) {
    std::u32string u = py::decode(obj.str()), r;
    pick(static_cast<int64_t>(u.size()), [&](size_t i) { r += u[i]; });
    return Value::string(py::encode(r), obj.markup);
  }
  if (obj.kind == Kind::List && (obj.is_plain_list() || obj.list_obj().seq == SeqKind::Range)) {
    const auto& items = obj.list_obj().items;
    ValueList r;
    pick(static_cast<int64_t>(items.size()), [&](size_t i) { r.push_back(items[i]); });
    return Value::list(std::move(r), obj.is_tuple() ? SeqKind::Tuple : SeqKind::List);
  }
  return Value::undefined(type_name(obj) + " object is not sliceable");
}

Value Interp::getattr(const Value& obj, std::string_view name) {
  Value out;
  switch (obj.kind) {
    case Kind::Undefined: fail_undefined(obj);
    case Kind::Dict:
      if (builtin_attr(obj, name, out)) return out;
      if (const Value* v = obj.dict_obj().find(name)) return *v;
      break;
    case Kind::Namespace:
      if (const Value* v = obj.ns_obj().find(name)) return *v;
      break;
    case Kind::Object:
      if (obj.o->get_attr(name, out)) return out;
      break;
    case Kind::String:
    case Kind::List:
      if (builtin_attr(obj, name, out)) return out;
      break;
    default: break;
  }
  return no_attr(obj, name);
}

Value Interp::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.kind == Kind::Dict) {
    if (const Value* v = obj.dict_obj().find(key)) return *v;
  } else if (key.is_int() && key.kind != Kind::Float) {
    int64_t idx = key.as_int();
    if (obj.kind == Kind::List && (obj.is_plain_list() || obj.list_obj().seq == SeqKind::Range)) {
      const auto& items = obj.list_obj().items;
      int64_t n = static_cast<int64_t>(items.size());
      if (idx < 0) idx += n;
      if (idx >= 0 && idx < n) return items[static_cast<size_t>(idx)];
    } else if (obj.kind == Kind::String) {
      int64_t n = static_cast<int64_t>(py::cp_len(obj.str()));
      if (idx < 0) idx += n;
      if (idx >= 0 && idx < n) {
        size_t b = py::byte_offset(obj.str(), static_cast<size_t>(idx)), e = b;
        py::next_cp(obj.str(), e);
        return Value::string(obj.str().substr(b, e - b), obj.markup);
      }
    }
  }
  if (key.kind == Kind::String) return getattr(obj, key.str());
  return Value::undefined(obj_repr_for_msg(obj) + " has no element " + repr(key));
}

Value Interp::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.kind == Kind::Object && callee.o->callable()) return callee.o->call(*this, args);
  raise("TypeError", "'" + type_name(callee) + "' object is not callable");
}

Value Interp::call_filter(std::string_view name, const Value& v, CallArgs& args) {
  const FilterFn* f = find_filter(name);
  if (!f) raise("TemplateRuntimeError", "No filter named '" + std::string(name) + "' found.");
  return f->fn(*this, v, args);
}

bool Interp::call_test(std::string_view name, const Value& v, CallArgs& args) {
  const TestFn* t = find_test(name);
  if (!t) raise("TemplateRuntimeError", "No test named '" + std::string(name) + "' found.");
  return t->fn(*this, v, args);
}

bool Interp::contains(const Value& c, const Value& item) {
  switch (c.kind) {
    case Kind::Undefined: return false;
    case Kind::String:
      if (item.kind != Kind::String)
        raise("TypeError", "'in <string>' requires string as left operand, not " + type_name(item));
      return c.str().find(item.str()) != std::string::npos;
    case Kind::List:
      charge_steps(c.list_obj().items.size());
      for (const auto& v : c.list_obj().items)
        if (py_eq(v, item)) return true;
      return false;
    case Kind::Dict: return c.dict_obj().find(item) != nullptr;
    case Kind::Iterator: {
      auto& it = c.iter_obj();
      while (it.pos < it.items.size()) {
        charge_steps(1);
        if (py_eq(it.items[it.pos++], item)) return true;
      }
      return false;
    }
    default: raise("TypeError", "argument of type '" + type_name(c) + "' is not iterable");
  }
}

bool Interp::compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return py_eq(a, b);
  if (op == "!=") return !py_eq(a, b);
  if (op == "in") return contains(b, a);
  if (op == "notin") return !contains(b, a);
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind == Kind::Float || b.kind == Kind::Float) {
      double x = a.as_double(), y = b.as_double();
      return op == "<" ? x < y : op == "<=" ? x <= y : op == ">" ? x > y : x >= y;
    }
    int64_t x = a.as_int(), y = b.as_int();
    return op == "<" ? x < y : op == "<=" ? x <= y : op == ">" ? x > y : x >= y;
  }
  bool comparable = (a.kind == Kind::String && b.kind == Kind::String) ||
                    (a.is_plain_list() && b.is_plain_list() && a.list_obj().seq == b.list_obj().seq);
  if (!comparable)
    raise("TypeError", "'" + op + "' not supported between instances of '" + type_name(a) + "' and '" +
                           type_name(b) + "'");
  if (op == "<") return py_less(a, b, "<");
  if (op == "<=") return !py_less(b, a, "<=");
  if (op == ">") return py_less(b, a, ">");
  return !py_less(a, b, ">=");
}

Value Interp::binop(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && a.kind != Kind::Float && b.kind != Kind::Float;
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) raise("OverflowError", "integer result too large (64-bit integers)");
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() + b.as_double());
    if (a.kind == Kind::String && b.kind == Kind::String) {
      if (a.markup || b.markup) {
        std::string l = a.markup ? a.str() : html_escape(a.str()), r = b.markup ? b.str() : html_escape(b.str());
        return Value::string(l + r, true);
      }
      return Value::string(a.str() + b.str());
    }
    if (a.is_plain_list() && b.is_plain_list() && a.list_obj().seq == b.list_obj().seq) {
      ValueList items = a.list_obj().items;
      items.insert(items.end(), b.list_obj().items.begin(), b.list_obj().items.end());
      return Value::list(std::move(items), a.list_obj().seq);
    }
    if (a.kind == Kind::String || a.is_plain_list()) {
      std::string tn = type_name(a) == "Markup" ? "str" : type_name(a);
      raise("TypeError", "can only concatenate " + tn + " (not \"" + type_name(b) + "\") to " + tn);
    }
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) raise("OverflowError", "integer result too large (64-bit integers)");
      return Value::integer(r);
    }
    if (nums) return Value::number(a.as_double() - b.as_double());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value::integer(checked_mul(a.as_int(), b.as_int()));
    if (nums) return Value::number(a.as_double() * b.as_double());
    bool a_seq = a.kind == Kind::String || a.is_plain_list(), b_seq = b.kind == Kind::String || b.is_plain_list();
    if (a_seq && b.is_int() && b.kind != Kind::Float) return repeat(a, b.as_int());
    if (b_seq && a.is_int() && a.kind != Kind::Float) return repeat(b, a.as_int());
    if (a_seq || b_seq)
      raise("TypeError", "can't multiply sequence by non-int of type '" + type_name(a_seq ? b : a) + "'");
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!nums) unsupported("/", a, b);
    if (b.as_double() == 0) raise("ZeroDivisionError", "division by zero");
    if (ints) return Value::number(static_cast<double>(a.as_int()) / static_cast<double>(b.as_int()));
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.kind == Kind::String) return Value::string(percent_format(a.str(), b), a.markup);
    if (!nums) unsupported(op, a, b);
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) raise("ZeroDivisionError", op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
      if (x == INT64_MIN && y == -1) raise("OverflowError", "integer result too large (64-bit integers)");
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        q -= 1;
        r += y;
      }
      return Value::integer(op == "//" ? q : r);
    }
    double x = a.as_double(), y = b.as_double();
    if (y == 0) raise("ZeroDivisionError", op == "//" ? "float floor division by zero" : "float modulo");
    if (op == "//") return Value::number(std::floor(x / y));
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    return Value::number(r);
  }
  if (op == "**") {
    if (!nums) unsupported("** or pow()", a, b);
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), r = 1;
      while (e > 0) {
        if (e & 1) r = checked_mul(r, base);
        e >>= 1;
        if (e) base = checked_mul(base, base);
      }
      return Value::integer(r);
    }
    if (a.as_double() == 0 && b.as_double() < 0) raise("ZeroDivisionError", "0.0 cannot be raised to a negative power");
    return Value::number(std::pow(a.as_double(), b.as_double()));
  }
  raise("TemplateRuntimeError", "unknown operator " + op);
}

}  // namespace tmill::jinja
