// Tree-walking interpreter for parsed Jinja templates, with Jinja2's scoping rules:
// - the template body writes to the top-level scope; `if` does not open a scope;
// - every for-loop iteration, macro call, with/filter/set-block/generation body gets a fresh scope
//   whose parent is the enclosing one (assignments inside do not leak out);
// - macros are closures over the scope they were defined in (late binding, like Python).
// Errors are JinjaError exceptions internally; parse()/render() (jinja.cpp) turn them into Result errors.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "jinja/ast.h"
#include "jinja/builtins.h"
#include "jinja/jinja.h"
#include "jinja/value.h"

namespace tmill::jinja {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

class Interp {
 public:
  // `now` is strftime_now()'s clock reading (broken-down time); `limits` gives the max_* bounds (its own
  // `now` is not read).
  Interp(const Program& prog, const RenderOptions& limits, std::tm now);
  ~Interp();
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  // Renders with the given top-level variables; raises JinjaError.
  std::string render(const std::vector<std::pair<std::string, Value>>& context);

  // Used by built-ins.
  Value call(const Value& callee, CallArgs& args);
  Value getattr(const Value& obj, std::string_view name);
  Value getitem(const Value& obj, const Value& key);
  Value call_filter(std::string_view name, const Value& v, CallArgs& args);
  bool call_test(std::string_view name, const Value& v, CallArgs& args);
  void register_namespace(const std::shared_ptr<NamespaceObj>& ns) { namespaces_.push_back(ns); }
  const std::tm& now() const { return now_; }
  int line() const { return line_; }

  // Macro machinery (MacroObj calls back here).
  Value call_macro(const MacroDef& def, const ScopePtr& closure, const Value& caller, CallArgs& args);
  // Recursive loop: renders the loop body over `items` one level deeper.
  Value run_recursive_loop(const Stmt& s, const ScopePtr& scope, const Value& iterable, int depth);

 private:
  enum class Flow { Normal, Break, Continue };
  struct DepthGuard {
    Interp& in;
    explicit DepthGuard(Interp& i);
    ~DepthGuard() { --in.depth_; }
  };

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out);
  void exec_for(const Stmt& s, const ScopePtr& scope, std::string& out, const Value& iterable, int depth);
  void assign(const Expr& target, const Value& v, Scope& scope);
  void emit(std::string& out, std::string_view text);
  std::string render_block(const Body& body, const ScopePtr& parent);
  Value apply_filter_chain(const Expr& chain, Value base, const ScopePtr& scope);

  Value eval(const Expr& e, const ScopePtr& scope);
  void eval_args(const CallSpec& spec, const ScopePtr& scope, CallArgs& out);
  Value eval_slice(const Value& obj, const Expr& slice, const ScopePtr& scope);
  Value binop(const std::string& op, const Value& a, const Value& b);

 public:
  bool contains(const Value& container, const Value& item);
  bool compare(const std::string& op, const Value& a, const Value& b);

 private:

  const Program& prog_;
  RenderOptions limits_;
  std::tm now_;
  Budget budget_;
  Budget* prev_budget_ = nullptr;
  int depth_ = 0;
  uintptr_t stack_limit_ = 0;  // lowest frame address we allow (thread stack bottom + reserve)
  int line_ = 0;
  std::string* top_out_ = nullptr;
  ScopePtr globals_;
  std::vector<ScopePtr> captured_;  // scopes closed over by macros (cleared after rendering: breaks cycles)
  std::vector<std::shared_ptr<NamespaceObj>> namespaces_;
};

// Python str % args formatting ("%s", "%d", "%05.2f", "%(name)s", ...). format.cpp
std::string percent_format(const std::string& fmt, const Value& args);
// Python str.format(*args, **kwargs) subset: {} {0} {name} with format specs. format.cpp
std::string brace_format(const std::string& fmt, const CallArgs& args);
// datetime.strftime with the C locale. format.cpp
std::string py_strftime(const std::string& fmt, const std::tm& tm);

}  // namespace tmill::jinja
