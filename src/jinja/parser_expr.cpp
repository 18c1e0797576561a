// Expression half of the parser (see parser.h for the precedence ladder).
#include <algorithm>

#include "jinja/builtins.h"
#include "jinja/parser.h"

namespace tmill::jinja {

ExprPtr Parser::make(EK kind, int line, std::vector<ExprPtr> args, std::string name) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  e->args = std::move(args);
  e->name = std::move(name);
  return finish(std::move(e));
}

ExprPtr Parser::finish(ExprPtr e) {
  int d = 0;
  for (const auto& a : e->args)
    if (a) d = std::max(d, a->depth);
  if (e->call) {
    for (const auto& a : e->call->pos) d = std::max(d, a->depth);
    for (const auto& [k, a] : e->call->kw) d = std::max(d, a->depth);
    if (e->call->dyn_args) d = std::max(d, e->call->dyn_args->depth);
    if (e->call->dyn_kwargs) d = std::max(d, e->call->dyn_kwargs->depth);
  }
  e->depth = d + 1;
  if (e->depth > kMaxExprDepth) fail("expression is nested too deeply", e->line);
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

ExprPtr Parser::parse_condexpr() {
  NestGuard nest(*this);
  int line = cur().line;
  ExprPtr expr1 = parse_or();
  while (skip_name("if")) {
    ExprPtr expr2 = parse_or();
    ExprPtr expr3;
    if (skip_name("else")) expr3 = parse_condexpr();
    std::vector<ExprPtr> args;
    args.push_back(std::move(expr1));
    args.push_back(std::move(expr2));
    args.push_back(std::move(expr3));
    expr1 = make(EK::CondExpr, line, std::move(args));
  }
  return expr1;
}

ExprPtr Parser::parse_or() {
  int line = cur().line;
  ExprPtr left = parse_and();
  while (skip_name("or")) {
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_and());
    left = make(EK::Or, line, std::move(args));
  }
  return left;
}

ExprPtr Parser::parse_and() {
  int line = cur().line;
  ExprPtr left = parse_not();
  while (skip_name("and")) {
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_not());
    left = make(EK::And, line, std::move(args));
  }
  return left;
}

ExprPtr Parser::parse_not() {
  NestGuard nest(*this);
  if (is_name("not")) {
    int line = cur().line;
    next();
    std::vector<ExprPtr> args;
    args.push_back(parse_not());
    return make(EK::Not, line, std::move(args));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  int line = cur().line;
  ExprPtr first = parse_math1();
  std::vector<ExprPtr> args;
  std::vector<std::string> ops;
  while (true) {
    if (cur().type == Tok::Op && (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
                                  cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
      ops.push_back(cur().value);
      next();
    } else if (is_name("in")) {
      ops.push_back("in");
      next();
    } else if (is_name("not") && look().type == Tok::Name && look().value == "in") {
      ops.push_back("notin");
      next();
      next();
    } else {
      break;
    }
    args.push_back(parse_math1());
  }
  if (ops.empty()) return first;
  args.insert(args.begin(), std::move(first));
  auto e = make(EK::Compare, line, std::move(args));
  e->ops = std::move(ops);
  return e;
}

ExprPtr Parser::parse_math1() {
  int line = cur().line;
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    std::string op = cur().value;
    next();
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_concat());
    left = make(EK::BinOp, line, std::move(args), op);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  int line = cur().line;
  std::vector<ExprPtr> args;
  args.push_back(parse_math2());
  while (skip_op("~")) args.push_back(parse_math2());
  if (args.size() == 1) return std::move(args[0]);
  return make(EK::Concat, line, std::move(args));
}

ExprPtr Parser::parse_math2() {
  int line = cur().line;
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    std::string op = cur().value;
    next();
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_pow());
    left = make(EK::BinOp, line, std::move(args), op);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  int line = cur().line;
  ExprPtr left = parse_unary();
  while (skip_op("**")) {
    std::vector<ExprPtr> args;
    args.push_back(std::move(left));
    args.push_back(parse_unary());
    left = make(EK::BinOp, line, std::move(args), "**");
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  NestGuard nest(*this);
  int line = cur().line;
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    EK k = is_op("-") ? EK::Neg : EK::Pos;
    next();
    std::vector<ExprPtr> args;
    args.push_back(parse_unary(false));
    node = make(k, line, std::move(args));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& tok = cur();
  int line = tok.line;
  if (tok.type == Tok::Name) {
    const std::string& n = tok.value;
    ExprPtr e;
    if (n == "true" || n == "True" || n == "false" || n == "False") {
      e = make(EK::Const, line);
      e->value = Value::boolean(n == "true" || n == "True");
    } else if (n == "none" || n == "None") {
      e = make(EK::Const, line);
      e->value = Value::none();
    } else {
      e = make(EK::Name, line, {}, n);
      if (!macro_stack_.empty()) {
        if (n == "varargs") macro_stack_.back()->uses_varargs = true;
        if (n == "kwargs") macro_stack_.back()->uses_kwargs = true;
        if (n == "caller") macro_stack_.back()->uses_caller = true;
      }
    }
    next();
    return e;
  }
  if (tok.type == Tok::String) {
    std::string s;
    while (cur().type == Tok::String) {
      s += cur().value;
      next();
    }
    auto e = make(EK::Const, line);
    e->value = Value::string(std::move(s));
    return e;
  }
  if (tok.type == Tok::Int || tok.type == Tok::Float) {
    auto e = make(EK::Const, line);
    e->value = tok.type == Tok::Int ? Value::integer(tok.ival) : Value::number(tok.fval);
    next();
    return e;
  }
  if (is_op("(")) {
    next();
    ExprPtr e = parse_tuple(false, true, {}, true);
    expect_op(")");
    return e;
  }
  if (is_op("[")) return parse_list();
  if (is_op("{")) return parse_dict();
  fail("unexpected " + describe(tok));
}

bool Parser::is_tuple_end(const std::vector<std::string>& extra_end) const {
  if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || cur().type == Tok::Eof || is_op(")")) return true;
  for (const auto& e : extra_end)
    if (cur().type == Tok::Name && cur().value == e) return true;
  return false;
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr, const std::vector<std::string>& extra_end,
                            bool explicit_parens) {
  int line = cur().line;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (is_op(",")) is_tuple = true;
    else break;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parens) fail("Expected an expression, got " + describe(cur()));
  }
  return make(EK::Tuple, line, std::move(args));
}

ExprPtr Parser::parse_list() {
  int line = cur().line;
  expect_op("[");
  std::vector<ExprPtr> items;
  while (!is_op("]")) {
    if (!items.empty()) expect_op(",");
    if (is_op("]")) break;
    items.push_back(parse_expression());
  }
  expect_op("]");
  return make(EK::List, line, std::move(items));
}

ExprPtr Parser::parse_dict() {
  int line = cur().line;
  expect_op("{");
  std::vector<ExprPtr> items;
  while (!is_op("}")) {
    if (!items.empty()) expect_op(",");
    if (is_op("}")) break;
    items.push_back(parse_expression());
    expect_op(":");
    items.push_back(parse_expression());
  }
  expect_op("}");
  return make(EK::Dict, line, std::move(items));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
    else if (is_op("(")) node = parse_call(std::move(node));
    else break;
  }
  return node;
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) node = parse_filter(std::move(node), false);
    else if (is_name("is")) node = parse_test(std::move(node));
    else if (is_op("(")) node = parse_call(std::move(node));
    else break;
  }
  return node;
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  int line = cur().line;
  if (skip_op(".")) {
    std::vector<ExprPtr> args;
    args.push_back(std::move(node));
    if (cur().type == Tok::Name) {
      std::string attr = cur().value;
      next();
      return make(EK::GetAttr, line, std::move(args), attr);
    }
    if (cur().type == Tok::Int) {
      auto idx = make(EK::Const, line);
      idx->value = Value::integer(cur().ival);
      next();
      args.push_back(std::move(idx));
      return make(EK::GetItem, line, std::move(args));
    }
    fail("expected name or number");
  }
  expect_op("[");
  std::vector<ExprPtr> subs;
  while (!is_op("]")) {
    if (!subs.empty()) expect_op(",");
    subs.push_back(parse_subscribed());
  }
  expect_op("]");
  ExprPtr index = subs.size() == 1 ? std::move(subs[0]) : make(EK::Tuple, line, std::move(subs));
  std::vector<ExprPtr> args;
  args.push_back(std::move(node));
  args.push_back(std::move(index));
  return make(EK::GetItem, line, std::move(args));
}

ExprPtr Parser::parse_subscribed() {
  int line = cur().line;
  std::vector<ExprPtr> args;
  if (skip_op(":")) {
    args.push_back(nullptr);
  } else {
    ExprPtr node = parse_expression();
    if (!skip_op(":")) return node;
    args.push_back(std::move(node));
  }
  if (is_op(":")) args.push_back(nullptr);
  else if (!is_op("]") && !is_op(",")) args.push_back(parse_expression());
  else args.push_back(nullptr);
  if (skip_op(":")) {
    if (!is_op("]") && !is_op(",")) args.push_back(parse_expression());
    else args.push_back(nullptr);
  } else {
    args.push_back(nullptr);
  }
  return make(EK::Slice, line, std::move(args));
}

std::unique_ptr<CallSpec> Parser::parse_call_args() {
  expect_op("(");
  auto spec = std::make_unique<CallSpec>();
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      expect_op(",");
      if (is_op(")")) break;
    }
    first = false;
    if (skip_op("*")) {
      if (spec->dyn_args || spec->dyn_kwargs) fail("invalid syntax for function call expression");
      spec->dyn_args = parse_expression();
    } else if (skip_op("**")) {
      if (spec->dyn_kwargs) fail("invalid syntax for function call expression");
      spec->dyn_kwargs = parse_expression();
    } else if (cur().type == Tok::Name && look().type == Tok::Op && look().value == "=") {
      if (spec->dyn_kwargs) fail("invalid syntax for function call expression");
      std::string key = cur().value;
      next();
      next();
      spec->kw.emplace_back(key, parse_expression());
    } else {
      if (spec->dyn_args || spec->dyn_kwargs || !spec->kw.empty()) fail("invalid syntax for function call expression");
      spec->pos.push_back(parse_expression());
    }
  }
  expect_op(")");
  return spec;
}

ExprPtr Parser::parse_call(ExprPtr node) {
  int line = cur().line;
  auto spec = parse_call_args();
  auto e = std::make_unique<Expr>();
  e->kind = EK::Call;
  e->line = line;
  e->args.push_back(std::move(node));
  e->call = std::move(spec);
  return finish(std::move(e));
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    int line = cur().line;
    std::string name = expect_name();
    while (is_op(".")) {
      next();
      name += "." + expect_name();
    }
    auto e = std::make_unique<Expr>();
    e->kind = EK::Filter;
    e->line = line;
    e->name = name;
    e->filter = find_filter(name);  // null when unknown: check_filters_and_tests decides
    e->args.push_back(std::move(node));
    e->call = is_op("(") ? parse_call_args() : std::make_unique<CallSpec>();
    node = finish(std::move(e));
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  int line = cur().line;
  next();  // "is"
  bool negated = skip_name("not");
  std::string name = expect_name();
  while (is_op(".")) {
    next();
    name += "." + expect_name();
  }
  auto e = std::make_unique<Expr>();
  e->kind = EK::Test;
  e->line = line;
  e->name = name;
  e->test = find_test(name);  // null when unknown: check_filters_and_tests decides
  e->args.push_back(std::move(node));
  if (is_op("(")) {
    e->call = parse_call_args();
  } else {
    e->call = std::make_unique<CallSpec>();
    bool arg_start = cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                     cur().type == Tok::Float || is_op("(") || is_op("[") || is_op("{");
    if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      e->call->pos.push_back(parse_postfix(parse_primary()));
    }
  }
  ExprPtr out = finish(std::move(e));
  if (negated) {
    std::vector<ExprPtr> args;
    args.push_back(std::move(out));
    out = make(EK::Not, line, std::move(args));
  }
  return out;
}

ExprPtr Parser::parse_assign_target(bool with_tuple, bool name_only, const std::vector<std::string>& extra_end,
                                    bool with_namespace) {
  int line = cur().line;
  ExprPtr target;
  if (with_namespace && cur().type == Tok::Name && look().type == Tok::Op && look().value == ".") {
    std::vector<ExprPtr> args;
    args.push_back(make(EK::Name, line, {}, cur().value));
    next();
    next();
    std::string attr = expect_name();
    return make(EK::GetAttr, line, std::move(args), attr);
  }
  if (name_only) {
    std::string n = expect_name();
    return make(EK::Name, line, {}, n);
  }
  target = with_tuple ? parse_tuple(true, true, extra_end) : parse_primary();
  auto check = [&](const Expr& e) {
    if (e.kind != EK::Name) fail(std::string("can't assign to ") + (e.kind == EK::Const ? "'const'" : "'expression'"), line);
    if (e.name == "true" || e.name == "false" || e.name == "none" || e.name == "True" || e.name == "False" ||
        e.name == "None")
      fail("can't assign to constant", line);
  };
  if (target->kind == EK::Tuple) {
    for (const auto& a : target->args) {
      if (a->kind == EK::Tuple) {
        for (const auto& b : a->args) check(*b);
      } else {
        check(*a);
      }
    }
  } else {
    check(*target);
  }
  return target;
}

}  // namespace tmill::jinja
