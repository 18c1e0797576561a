// When an unknown filter or test is an error, as Jinja2's compiler decides it: at compile time
// (TemplateAssertionError "No filter named 'x'.") unless the use sits in a "soft" frame, i.e. inside an
// {% if %}/{% elif %}/{% else %} (test and bodies) or an inline `a if b else c`, where Jinja2 compiles a
// stub that raises only when it runs (TemplateRuntimeError "No filter named 'x' found.", raised by
// Interp when it meets an unresolved Expr). A frame that Jinja2 opens with Frame.inner() is not soft
// even inside an if: for-loop bodies, else bodies and loop filters, macro and call-block bodies and
// parameter defaults, filter blocks, set blocks (body and filter), with bodies, {% generation %}.
// What stays in the enclosing frame: a for loop's iterable, a call block's call, with's values.
// This lets real chat templates name filters they never run on the conversations at hand (DeepSeek
// V3.2/V4 call `from_json` only in their tool branches), exactly as Hugging Face's Jinja2 does.
#include "jinja/parser.h"

#include "jinja/builtins.h"

namespace tmill::jinja {

namespace {

struct Checker {
  void expr(const Expr* e, bool soft) {
    if (!e) return;
    if (e->kind == EK::CondExpr) soft = true;
    if (!soft && e->kind == EK::Filter && !e->filter)
      throw JinjaError("TemplateAssertionError", "No filter named '" + e->name + "'.", e->line);
    if (!soft && e->kind == EK::Test && !e->test)
      throw JinjaError("TemplateAssertionError", "No test named '" + e->name + "'.", e->line);
    for (const ExprPtr& a : e->args) expr(a.get(), soft);
    if (e->call) {
      for (const ExprPtr& a : e->call->pos) expr(a.get(), soft);
      for (const auto& kw : e->call->kw) expr(kw.second.get(), soft);
      expr(e->call->dyn_args.get(), soft);
      expr(e->call->dyn_kwargs.get(), soft);
    }
  }

  void macro(const MacroDef& m) {
    for (const auto& p : m.params) expr(p.second.get(), false);
    body(m.body, false);
  }

  void body(const Body& b, bool soft) {
    for (const Stmt& s : b) stmt(s, soft);
  }

  void stmt(const Stmt& s, bool soft) {
    switch (s.kind) {
      case SK::If:
        for (const ExprPtr& c : s.conds) expr(c.get(), true);
        for (const Body& b : s.bodies) body(b, true);
        break;
      case SK::For:
        expr(s.expr.get(), soft);  // the iterable: the enclosing frame
        expr(s.cond.get(), false);
        body(s.body, false);
        body(s.else_body, false);
        break;
      case SK::Output:
      case SK::Set:
        expr(s.expr.get(), soft);
        expr(s.target.get(), soft);
        break;
      case SK::SetBlock:
      case SK::FilterBlock:
        body(s.body, false);
        expr(s.expr.get(), false);
        break;
      case SK::Macro:
        if (s.macro) macro(*s.macro);
        break;
      case SK::CallBlock:
        if (s.macro) macro(*s.macro);
        expr(s.expr.get(), soft);
        break;
      case SK::With:
        for (const auto& a : s.assigns) expr(a.second.get(), soft);
        body(s.body, false);
        break;
      case SK::Scope:
        body(s.body, false);
        break;
      case SK::Text:
      case SK::Break:
      case SK::Continue:
        break;
    }
  }
};

}  // namespace

void check_filters_and_tests(const Body& body) { Checker{}.body(body, false); }

}  // namespace tmill::jinja
