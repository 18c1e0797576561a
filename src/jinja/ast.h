// Syntax tree of a parsed Jinja template. Expressions and statements are tagged structs; the
// interpreter (interp.*) walks them. Nesting depth is bounded by the parser.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace tmill::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class EK : uint8_t {
  Const,     // value
  Name,      // name
  List,      // args: items
  Tuple,     // args: items
  Dict,      // args: k0, v0, k1, v1, ...
  GetAttr,   // args[0].name
  GetItem,   // args[0][args[1]]
  Slice,     // args[0..2]: start, stop, step (each may be null); only as GetItem's index
  Call,      // args[0](call)
  Filter,    // args[0] | name(call); args[0] is null inside {% filter %} / {% set x | f %}
  Test,      // args[0] is name(call)
  Neg,       // -args[0]
  Pos,       // +args[0]
  Not,       // not args[0]
  BinOp,     // args[0] name args[1], name in + - * / // % **
  Concat,    // args[0] ~ args[1] ~ ...
  And,       // args[0] and args[1]
  Or,        // args[0] or args[1]
  Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...; ops: == != < <= > >= in notin
  CondExpr,  // args[0] if args[1] else args[2] (args[2] may be null)
};

struct CallSpec {
  std::vector<ExprPtr> pos;
  std::vector<std::pair<std::string, ExprPtr>> kw;
  ExprPtr dyn_args;    // *expr
  ExprPtr dyn_kwargs;  // **expr
};

struct FilterFn;
struct TestFn;

struct Expr {
  EK kind = EK::Const;
  int line = 0;
  int depth = 1;  // height of this subtree
  std::string name;
  Value value;
  std::vector<ExprPtr> args;
  std::vector<std::string> ops;
  std::unique_ptr<CallSpec> call;
  // Resolved at parse time; null when unknown, which is an error when it runs (resolve.cpp).
  const FilterFn* filter = nullptr;
  const TestFn* test = nullptr;
};

enum class SK : uint8_t {
  Text,         // text
  Output,       // {{ expr }}
  If,           // conds[k] -> bodies[k]; bodies may have one extra entry: else
  For,          // for target in expr [if cond] [recursive]: body, else_body
  Set,          // set target = expr   (target: Name, Tuple of names, or GetAttr on a namespace)
  SetBlock,     // set target [| filter] %}body{% endset
  Macro,        // macro name(params): body
  CallBlock,    // call[(params)] expr: body (exposed as caller())
  FilterBlock,  // filter chain: body
  With,         // with assigns: body
  Scope,        // generation / block: body in its own scope
  Break,
  Continue,
};

struct Stmt;
using Body = std::vector<Stmt>;

struct MacroDef {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

struct Stmt {
  SK kind = SK::Text;
  int line = 0;
  std::string text;
  ExprPtr expr;    // Output/For iter/Set value/CallBlock call/FilterBlock+SetBlock filter chain
  ExprPtr target;  // For/Set/SetBlock
  ExprPtr cond;    // For filter
  bool recursive = false;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body, else_body;
  std::shared_ptr<MacroDef> macro;                            // Macro, CallBlock (the caller)
  std::vector<std::pair<ExprPtr, ExprPtr>> assigns;           // With
};

struct Program {
  Body body;
};

}  // namespace tmill::jinja
