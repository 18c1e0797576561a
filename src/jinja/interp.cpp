// Statement execution, macros and loops (expressions are in eval.cpp).
#include "jinja/interp.h"

#include <algorithm>
#include <functional>

#include <pthread.h>

namespace tmill::jinja {

namespace {

struct MacroObj : Object {
  Interp* in;
  const MacroDef* def;
  ScopePtr closure;
  Value caller;
  MacroObj(Interp* i, const MacroDef* d, ScopePtr c) : in(i), def(d), closure(std::move(c)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro '" + def->name + "'>"; }
  bool callable() const override { return true; }
  Value call(Interp& i, CallArgs& args) override { return i.call_macro(*def, closure, caller, args); }
  bool get_attr(std::string_view name, Value& out) override {
    if (name == "name") {
      out = Value::string(def->name);
      return true;
    }
    return false;
  }
};

// Jinja's LoopContext. The optional `if` filter is applied lazily, as Jinja does, so peeking
// (loop.last, loop.nextitem, loop.length) evaluates it only as far as needed.
struct LoopObj : Object, std::enable_shared_from_this<LoopObj> {
  const Stmt* stmt = nullptr;
  ScopePtr scope;
  ValueList raw;
  size_t raw_pos = 0;
  ValueList items;
  bool exhausted = false;
  size_t index0 = 0;
  int depth = 1;
  bool have_changed = false;
  ValueList changed_last;
  std::function<bool(const Value&)> accept;

  bool fetch_one() {
    while (raw_pos < raw.size()) {
      const Value& v = raw[raw_pos++];
      if (!accept || accept(v)) {
        items.push_back(v);
        return true;
      }
    }
    exhausted = true;
    return false;
  }
  bool has(size_t idx) {
    while (items.size() <= idx && !exhausted) fetch_one();
    return idx < items.size();
  }
  size_t length() {
    while (fetch_one()) {
    }
    return items.size();
  }
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override {
    return "<LoopContext " + std::to_string(index0 + 1) + "/" + std::to_string(items.size()) + ">";
  }
  bool callable() const override { return true; }
  Value call(Interp& i, CallArgs& args) override {
    if (!stmt->recursive)
      raise("TypeError", "The loop must be recursive to be called, mark it with 'recursive'.");
    if (args.pos.size() != 1 || !args.kw.empty()) raise("TypeError", "loop() takes exactly one argument");
    return i.run_recursive_loop(*stmt, scope, args.pos[0], depth + 1);
  }
  bool get_attr(std::string_view name, Value& out) override;
};

struct LoopMethod : Object {
  std::shared_ptr<LoopObj> loop;
  std::string name;
  std::string type_name() const override { return "method"; }
  bool callable() const override { return true; }
  Value call(Interp&, CallArgs& args) override {
    if (name == "cycle") {
      if (args.pos.empty()) raise("TypeError", "no items for cycling given");
      return args.pos[loop->index0 % args.pos.size()];
    }
    // changed(*values)
    if (loop->have_changed && loop->changed_last.size() == args.pos.size()) {
      bool same = true;
      for (size_t k = 0; k < args.pos.size() && same; ++k) same = py_eq(loop->changed_last[k], args.pos[k]);
      if (same) return Value::boolean(false);
    }
    loop->have_changed = true;
    loop->changed_last = args.pos;
    return Value::boolean(true);
  }
};

bool LoopObj::get_attr(std::string_view name, Value& out) {
  auto i64 = [](size_t v) { return Value::integer(static_cast<int64_t>(v)); };
  if (name == "index") out = i64(index0 + 1);
  else if (name == "index0") out = i64(index0);
  else if (name == "first") out = Value::boolean(index0 == 0);
  else if (name == "last") out = Value::boolean(!has(index0 + 1));
  else if (name == "length") out = i64(length());
  else if (name == "revindex") out = i64(length() - index0);
  else if (name == "revindex0") out = i64(length() - index0 - 1);
  else if (name == "depth") out = Value::integer(depth);
  else if (name == "depth0") out = Value::integer(depth - 1);
  else if (name == "previtem")
    out = index0 > 0 ? items[index0 - 1] : Value::undefined("there is no previous item");
  else if (name == "nextitem")
    out = has(index0 + 1) ? items[index0 + 1] : Value::undefined("there is no next item");
  else if (name == "cycle" || name == "changed") {
    auto m = std::make_shared<LoopMethod>();
    m->loop = shared_from_this();
    m->name = std::string(name);
    out = Value::object(std::move(m));
  } else {
    return false;
  }
  return true;
}

}  // namespace

Interp::Interp(const Program& prog, const RenderOptions& limits, std::tm now)
    : prog_(prog), limits_(limits), now_(now) {
  budget_.alloc_left = limits.max_alloc_bytes;
  budget_.steps_left = limits.max_steps;
}

Interp::~Interp() {
  // Break reference cycles (macro <-> scope, namespace <-> namespace) so everything is freed.
  for (auto& s : captured_) {
    s->vars.clear();
    s->parent.reset();
  }
  for (auto& ns : namespaces_) ns->attrs.clear();
}

Interp::DepthGuard::DepthGuard(Interp& i) : in(i) {
  if (++in.depth_ > in.limits_.max_depth) {
    --in.depth_;
    raise("ResourceLimitError", "maximum template recursion depth (" + std::to_string(in.limits_.max_depth) +
                                    ") exceeded");
  }
  // Stack frames differ a lot between builds (sanitizers) and threads differ in stack size, so also
  // stop well before the real end of this thread's stack.
  if (reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) < in.stack_limit_) {
    --in.depth_;
    raise("ResourceLimitError", "template recursion too deep for the thread's stack");
  }
}

// Lowest stack address rendering may reach: this thread's stack bottom plus a reserve for the
// non-recursive work below the deepest guarded frame (sorting, printing nested values, libc).
static uintptr_t compute_stack_limit() {
  thread_local uintptr_t cached = 1;  // stack bounds never change for a thread; 1 = not computed yet
  if (cached != 1) return cached;
  cached = 0;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return 0;
  void* addr = nullptr;
  size_t size = 0;
  int rc = pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  if (rc != 0 || !addr) return 0;
  size_t reserve = std::min<size_t>(size / 4, 1 << 20);
  cached = reinterpret_cast<uintptr_t>(addr) + reserve;
  return cached;
}

std::string Interp::render(const std::vector<std::pair<std::string, Value>>& context) {
  struct BudgetScope {
    Interp& in;
    explicit BudgetScope(Interp& i) : in(i) {
      in.prev_budget_ = current_budget();
      set_current_budget(&in.budget_);
    }
    ~BudgetScope() { set_current_budget(in.prev_budget_); }
  } budget_scope(*this);

  stack_limit_ = compute_stack_limit();
  try {
    globals_ = std::make_shared<Scope>();
    for (auto& [k, v] : make_globals()) globals_->vars[k] = v;
    auto ctx = std::make_shared<Scope>();
    ctx->parent = globals_;
    for (const auto& [k, v] : context) ctx->vars[k] = v;
    auto top = std::make_shared<Scope>();
    top->parent = ctx;
    captured_.push_back(top);
    std::string out;
    top_out_ = &out;
    exec_body(prog_.body, top, out);
    top_out_ = nullptr;
    return out;
  } catch (JinjaError& e) {
    top_out_ = nullptr;
    if (e.line == 0) e.line = line_;
    throw;
  }
}

void Interp::emit(std::string& out, std::string_view text) {
  charge_bytes(text.size());
  out.append(text);
  if (&out == top_out_ && out.size() > limits_.max_output_bytes)
    raise("ResourceLimitError", "template output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
}

Interp::Flow Interp::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const Stmt& s : body) {
    Flow f = exec(s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Interp::render_block(const Body& body, const ScopePtr& parent) {
  auto inner = std::make_shared<Scope>();
  inner->parent = parent;
  std::string buf;
  exec_body(body, inner, buf);
  return buf;
}

Value Interp::apply_filter_chain(const Expr& chain, Value base, const ScopePtr& scope) {
  // The chain is Filter(Filter(null, f1), f2)...: apply innermost first.
  if (chain.args[0]) base = apply_filter_chain(*chain.args[0], std::move(base), scope);
  CallArgs args;
  eval_args(*chain.call, scope, args);
  line_ = chain.line;
  if (!chain.filter) raise("TemplateRuntimeError", "No filter named '" + chain.name + "' found.");
  return chain.filter->fn(*this, base, args);
}

Interp::Flow Interp::exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
  line_ = s.line;
  switch (s.kind) {
    case SK::Text: emit(out, s.text); return Flow::Normal;
    case SK::Output: {
      Value v = eval(*s.expr, scope);
      if (v.kind == Kind::String) emit(out, v.str());
      else emit(out, to_str(v));
      return Flow::Normal;
    }
    case SK::If: {
      DepthGuard guard(*this);
      for (size_t k = 0; k < s.bodies.size(); ++k) {
        if (k < s.conds.size() && !truthy(eval(*s.conds[k], scope))) continue;
        return exec_body(s.bodies[k], scope, out);
      }
      return Flow::Normal;
    }
    case SK::For: {
      DepthGuard guard(*this);
      exec_for(s, scope, out, eval(*s.expr, scope), 1);
      return Flow::Normal;
    }
    case SK::Set: assign(*s.target, eval(*s.expr, scope), *scope); return Flow::Normal;
    case SK::SetBlock: {
      DepthGuard guard(*this);
      Value v = Value::string(render_block(s.body, scope));
      if (s.expr) v = apply_filter_chain(*s.expr, std::move(v), scope);
      line_ = s.line;
      assign(*s.target, v, *scope);
      return Flow::Normal;
    }
    case SK::Macro: {
      captured_.push_back(scope);
      scope->vars[s.macro->name] = Value::object(std::make_shared<MacroObj>(this, s.macro.get(), scope));
      return Flow::Normal;
    }
    case SK::CallBlock: {
      DepthGuard guard(*this);
      captured_.push_back(scope);
      Value caller = Value::object(std::make_shared<MacroObj>(this, s.macro.get(), scope));
      const Expr& call = *s.expr;
      Value callee = eval(*call.args[0], scope);
      CallArgs args;
      eval_args(*call.call, scope, args);
      args.kw.emplace_back("caller", caller);
      line_ = s.line;
      emit(out, to_str(this->call(callee, args)));
      return Flow::Normal;
    }
    case SK::FilterBlock: {
      DepthGuard guard(*this);
      Value v = Value::string(render_block(s.body, scope));
      emit(out, to_str(apply_filter_chain(*s.expr, std::move(v), scope)));
      return Flow::Normal;
    }
    case SK::With: {
      DepthGuard guard(*this);
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      std::vector<Value> values;
      for (const auto& [target, value] : s.assigns) values.push_back(eval(*value, scope));
      for (size_t k = 0; k < values.size(); ++k) assign(*s.assigns[k].first, values[k], *inner);
      return exec_body(s.body, inner, out);
    }
    case SK::Scope: {
      DepthGuard guard(*this);
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      return exec_body(s.body, inner, out);
    }
    case SK::Break: return Flow::Break;
    case SK::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

void Interp::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out, const Value& iterable, int depth) {
  auto loop = std::make_shared<LoopObj>();
  loop->stmt = &s;
  loop->scope = scope;
  loop->depth = depth;
  loop->raw = iterate(iterable);
  if (s.cond) {
    loop->accept = [this, &s, scope](const Value& v) {
      auto tmp = std::make_shared<Scope>();
      tmp->parent = scope;
      assign(*s.target, v, *tmp);
      charge_steps(1);
      return truthy(eval(*s.cond, tmp));
    };
  }
  Value loop_value = Value::object(loop);
  size_t i = 0;
  for (; loop->has(i); ++i) {
    charge_steps(1);
    loop->index0 = i;
    auto iter_scope = std::make_shared<Scope>();
    iter_scope->parent = scope;
    assign(*s.target, loop->items[i], *iter_scope);
    iter_scope->vars["loop"] = loop_value;
    Flow f = exec_body(s.body, iter_scope, out);
    if (f == Flow::Break) break;
  }
  loop->accept = nullptr;  // the filter closure holds the scope; drop it with the loop
  if (i == 0 && !s.else_body.empty()) {
    auto inner = std::make_shared<Scope>();
    inner->parent = scope;
    exec_body(s.else_body, inner, out);
  }
}

Value Interp::run_recursive_loop(const Stmt& s, const ScopePtr& scope, const Value& iterable, int depth) {
  DepthGuard guard(*this);
  std::string buf;
  exec_for(s, scope, buf, iterable, depth);
  return Value::string(std::move(buf));
}

void Interp::assign(const Expr& target, const Value& v, Scope& scope) {
  switch (target.kind) {
    case EK::Name: scope.vars[target.name] = v; return;
    case EK::Tuple: {
      if (v.kind != Kind::List && v.kind != Kind::Dict && v.kind != Kind::String && v.kind != Kind::Iterator)
        raise("TypeError", "cannot unpack non-iterable " + type_name(v) + " object");
      ValueList items = iterate(v);
      const size_t n = target.args.size();
      if (items.size() < n)
        raise("ValueError", "not enough values to unpack (expected " + std::to_string(n) + ", got " +
                                std::to_string(items.size()) + ")");
      if (items.size() > n) raise("ValueError", "too many values to unpack (expected " + std::to_string(n) + ")");
      for (size_t k = 0; k < n; ++k) assign(*target.args[k], items[k], scope);
      return;
    }
    case EK::GetAttr: {  // {% set ns.attr = v %}
      const Value* obj = scope.find(target.args[0]->name);
      if (!obj || obj->kind != Kind::Namespace)
        raise("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
      obj->ns_obj().set(target.name, v);
      return;
    }
    default: raise("TemplateSyntaxError", "can't assign to expression");
  }
}

Value Interp::call_macro(const MacroDef& def, const ScopePtr& closure, const Value& bound_caller, CallArgs& args) {
  DepthGuard guard(*this);
  charge_steps(1);
  auto scope = std::make_shared<Scope>();
  scope->parent = closure;
  const size_t n = def.params.size();
  if (args.pos.size() > n && !def.uses_varargs)
    raise("TypeError", "macro '" + def.name + "' takes not more than " + std::to_string(n) + " argument(s)");
  std::vector<std::pair<std::string, Value>> kw = std::move(args.kw);
  Value caller = bound_caller.is_undefined() ? Value::undefined("No caller defined") : bound_caller;
  for (auto it = kw.begin(); it != kw.end();) {
    if (it->first == "caller") {
      caller = it->second;
      it = kw.erase(it);
    } else {
      ++it;
    }
  }
  for (size_t k = 0; k < n; ++k) {
    const std::string& pname = def.params[k].first;
    const ExprPtr& def_expr = def.params[k].second;
    auto kit = std::find_if(kw.begin(), kw.end(), [&](const auto& p) { return p.first == pname; });
    if (k < args.pos.size()) {
      if (kit != kw.end()) raise("TypeError", "macro '" + def.name + "' got multiple values for argument '" + pname + "'");
      scope->vars[pname] = args.pos[k];
    } else if (kit != kw.end()) {
      scope->vars[pname] = kit->second;
      kw.erase(kit);
    } else if (def_expr) {
      scope->vars[pname] = eval(*def_expr, scope);
    } else {
      scope->vars[pname] = Value::undefined("parameter '" + pname + "' was not provided");
    }
  }
  if (def.uses_varargs) {
    ValueList rest;
    for (size_t k = n; k < args.pos.size(); ++k) rest.push_back(args.pos[k]);
    scope->vars["varargs"] = make_tuple(std::move(rest));
  }
  if (!kw.empty() && !def.uses_kwargs)
    raise("TypeError", "macro '" + def.name + "' takes no keyword argument '" + kw.front().first + "'");
  if (def.uses_kwargs) {
    auto d = std::make_shared<DictObj>();
    for (auto& [k, v] : kw) d->set(Value::string(k), v);
    scope->vars["kwargs"] = make_dict(std::move(d));
  }
  if (!caller.is_undefined() || def.uses_caller) scope->vars["caller"] = caller;
  int saved_line = line_;
  std::string buf;
  exec_body(def.body, scope, buf);
  line_ = saved_line;
  return Value::string(std::move(buf));
}

}  // namespace tmill::jinja
