// Jinja parser: tokens -> syntax tree, following Jinja2's grammar and operator precedence
// (or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary - + < postfix . [] () | is).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace tmill::jinja {

// Parses a whole template; raises JinjaError{"TemplateSyntaxError"/"TemplateAssertionError", msg, line}.
std::unique_ptr<Program> parse_template(std::string_view source, const LexOptions& opt = {});

// Raises TemplateAssertionError for an unknown filter or test outside an if/inline-if, as Jinja2's
// compiler does; those inside stay unresolved (null) and raise when they run (resolve.cpp).
void check_filters_and_tests(const Body& body);

constexpr int kMaxExprDepth = 200;  // height of one expression tree
constexpr int kMaxBlockDepth = 64;  // nested {% %} blocks

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}
  Body parse_all();

 private:
  friend struct ExprParser;
  // statements (parser.cpp)
  Body subparse(const std::vector<std::string>& end_tags);
  void parse_statement(Body& out);
  Stmt parse_for(int line);
  Stmt parse_if(int line);
  Stmt parse_set(int line);
  Stmt parse_macro(int line);
  Stmt parse_call_block(int line);
  Stmt parse_filter_block(int line);
  Stmt parse_with(int line);
  Stmt parse_scoped_body(int line, const std::string& end_tag, bool named);
  void parse_signature(MacroDef& m);
  void end_tag(const std::string& name);

  // expressions (parser_expr.cpp)
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter = true);
  ExprPtr parse_primary();
  ExprPtr parse_tuple(bool simplified = false, bool with_condexpr = true,
                      const std::vector<std::string>& extra_end = {}, bool explicit_parens = false);
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_call(ExprPtr node);
  std::unique_ptr<CallSpec> parse_call_args();
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  ExprPtr parse_assign_target(bool with_tuple, bool name_only, const std::vector<std::string>& extra_end,
                              bool with_namespace);
  ExprPtr make(EK kind, int line, std::vector<ExprPtr> args = {}, std::string name = {});
  ExprPtr finish(ExprPtr e);  // computes depth, enforces kMaxExprDepth

  // token stream
  const Token& cur() const { return t_[p_]; }
  const Token& look() const { return t_[p_ + 1 < t_.size() ? p_ + 1 : p_]; }
  void next() {
    if (p_ + 1 < t_.size()) ++p_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().value == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().value == n; }
  bool skip_op(const char* op);
  bool skip_name(const char* n);
  void expect_op(const char* op);
  std::string expect_name();
  void expect(Tok t);
  bool is_tuple_end(const std::vector<std::string>& extra_end) const;
  [[noreturn]] void fail(const std::string& msg, int line = 0) const;
  std::string describe(const Token& t) const;
  std::string looking_for() const;  // hint for unknown/misplaced end tags

  std::vector<Token> t_;
  size_t p_ = 0;
  int block_depth_ = 0;
  int expr_nest_ = 0;  // recursion depth of the expression parser
  struct NestGuard {
    Parser& p;
    explicit NestGuard(Parser& parser) : p(parser) {
      if (++p.expr_nest_ > kMaxExprDepth) p.fail("expression is nested too deeply");
    }
    ~NestGuard() { --p.expr_nest_; }
  };
  int loop_depth_ = 0;
  std::vector<MacroDef*> macro_stack_;
  std::vector<std::string> open_tags_;                // for error messages
  std::vector<std::vector<std::string>> end_stack_;   // end tags each open subparse waits for
};

}  // namespace tmill::jinja
