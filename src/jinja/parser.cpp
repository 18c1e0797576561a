// Statement half of the parser: {% ... %} tags and the template body.
#include "jinja/parser.h"

#include "jinja/builtins.h"

namespace tmill::jinja {

std::unique_ptr<Program> parse_template(std::string_view source, const LexOptions& opt) {
  Parser p(tokenize(source, opt));
  auto prog = std::make_unique<Program>();
  prog->body = p.parse_all();
  check_filters_and_tests(prog->body);
  return prog;
}

std::string Parser::describe(const Token& t) const {
  switch (t.type) {
    case Tok::Name: return "'" + t.value + "'";
    case Tok::Op: return "'" + t.value + "'";
    case Tok::String: return "string";
    case Tok::Int: return "integer";
    case Tok::Float: return "float";
    default: return "'" + std::string(tok_name(t.type)) + "'";
  }
}

void Parser::fail(const std::string& msg, int line) const {
  throw JinjaError("TemplateSyntaxError", msg, line ? line : cur().line);
}

bool Parser::skip_op(const char* op) {
  if (!is_op(op)) return false;
  next();
  return true;
}

bool Parser::skip_name(const char* n) {
  if (!is_name(n)) return false;
  next();
  return true;
}

void Parser::expect_op(const char* op) {
  if (!is_op(op)) fail(std::string("expected token '") + op + "', got " + describe(cur()));
  next();
}

std::string Parser::expect_name() {
  if (cur().type != Tok::Name) fail("expected token 'name', got " + describe(cur()));
  std::string v = cur().value;
  next();
  return v;
}

void Parser::expect(Tok t) {
  if (cur().type != t) fail(std::string("expected token '") + tok_name(t) + "', got " + describe(cur()));
  next();
}

Body Parser::parse_all() {
  Body body = subparse({});
  if (cur().type != Tok::Eof) fail("unexpected " + describe(cur()));
  return body;
}

// Parses template data, {{ }} and {% %} until a block tag named in `end_tags` (left unconsumed,
// positioned at its name) or the end of the template.
std::string Parser::looking_for() const {
  if (end_stack_.empty()) return "";
  const auto& tags = end_stack_.back();
  std::string want;
  for (size_t k = 0; k < tags.size(); ++k) want += (k ? " or '" : "'") + tags[k] + "'";
  std::string inner = open_tags_.size() >= 2 ? open_tags_[open_tags_.size() - 2] : open_tags_.back();
  return " Jinja was looking for the following tags: " + want + ". The innermost block that needs to be closed is '" +
         inner + "'.";
}

Body Parser::subparse(const std::vector<std::string>& end_tags) {
  Body body;
  if (!end_tags.empty()) end_stack_.push_back(end_tags);
  struct Pop {
    Parser& p;
    bool active;
    ~Pop() {
      if (active) p.end_stack_.pop_back();
    }
  } pop{*this, !end_tags.empty()};
  while (true) {
    const Token& t = cur();
    if (t.type == Tok::Eof) {
      if (!end_tags.empty()) {
        std::string want;
        for (size_t k = 0; k < end_tags.size(); ++k) want += (k ? " or '" : "'") + end_tags[k] + "'";
        fail("Unexpected end of template. Jinja was looking for the following tags: " + want +
             ". The innermost block that needs to be closed is '" + open_tags_.back() + "'.");
      }
      return body;
    }
    if (t.type == Tok::Text) {
      Stmt s;
      s.kind = SK::Text;
      s.line = t.line;
      s.text = t.value;
      body.push_back(std::move(s));
      next();
    } else if (t.type == Tok::VarBegin) {
      Stmt s;
      s.kind = SK::Output;
      s.line = t.line;
      next();
      s.expr = parse_tuple();
      expect(Tok::VarEnd);
      body.push_back(std::move(s));
    } else if (t.type == Tok::BlockBegin) {
      next();
      if (cur().type == Tok::Name) {
        for (const auto& e : end_tags)
          if (cur().value == e) return body;
      }
      parse_statement(body);
    } else {
      fail("unexpected " + describe(t));
    }
  }
}

void Parser::end_tag(const std::string& name) {
  if (!skip_name(name.c_str())) fail("expected '" + name + "'");
  expect(Tok::BlockEnd);
}

void Parser::parse_statement(Body& out) {
  if (cur().type != Tok::Name) fail("tag name expected");
  const std::string tag = cur().value;
  const int line = cur().line;
  if (++block_depth_ > kMaxBlockDepth) fail("template blocks are nested too deeply");
  open_tags_.push_back(tag);
  next();
  if (tag == "for") {
    out.push_back(parse_for(line));
  } else if (tag == "if") {
    out.push_back(parse_if(line));
  } else if (tag == "set") {
    out.push_back(parse_set(line));
  } else if (tag == "macro") {
    out.push_back(parse_macro(line));
  } else if (tag == "call") {
    out.push_back(parse_call_block(line));
  } else if (tag == "filter") {
    out.push_back(parse_filter_block(line));
  } else if (tag == "with") {
    out.push_back(parse_with(line));
  } else if (tag == "generation") {
    out.push_back(parse_scoped_body(line, "endgeneration", false));
  } else if (tag == "block") {
    out.push_back(parse_scoped_body(line, "endblock", true));
  } else if (tag == "print") {
    Stmt s;
    s.kind = SK::Output;
    s.line = line;
    s.expr = parse_tuple();
    expect(Tok::BlockEnd);
    out.push_back(std::move(s));
  } else if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop", line);
    Stmt s;
    s.kind = tag == "break" ? SK::Break : SK::Continue;
    s.line = line;
    expect(Tok::BlockEnd);
    out.push_back(std::move(s));
  } else if (tag == "extends" || tag == "include" || tag == "import" || tag == "from") {
    fail("'" + tag + "' is not supported: chat templates are standalone (no template loader)", line);
  } else {
    fail("Encountered unknown tag '" + tag + "'." + looking_for(), line);
  }
  open_tags_.pop_back();
  --block_depth_;
}

Stmt Parser::parse_for(int line) {
  Stmt s;
  s.kind = SK::For;
  s.line = line;
  s.target = parse_assign_target(true, false, {"in"}, false);
  if (!skip_name("in")) fail("expected 'in' in for loop");
  s.expr = parse_tuple(false, false, {"recursive"});
  if (skip_name("if")) s.cond = parse_expression();
  s.recursive = skip_name("recursive");
  expect(Tok::BlockEnd);
  ++loop_depth_;
  s.body = subparse({"endfor", "else"});
  --loop_depth_;
  if (skip_name("else")) {
    expect(Tok::BlockEnd);
    s.else_body = subparse({"endfor"});
  }
  end_tag("endfor");
  return s;
}

Stmt Parser::parse_if(int line) {
  Stmt s;
  s.kind = SK::If;
  s.line = line;
  s.conds.push_back(parse_tuple(false, false));
  expect(Tok::BlockEnd);
  while (true) {
    s.bodies.push_back(subparse({"elif", "else", "endif"}));
    if (skip_name("elif")) {
      s.conds.push_back(parse_tuple(false, false));
      expect(Tok::BlockEnd);
      continue;
    }
    if (skip_name("else")) {
      expect(Tok::BlockEnd);
      s.bodies.push_back(subparse({"endif"}));
    }
    break;
  }
  end_tag("endif");
  return s;
}

Stmt Parser::parse_set(int line) {
  Stmt s;
  s.line = line;
  s.target = parse_assign_target(true, false, {}, true);
  if (skip_op("=")) {
    s.kind = SK::Set;
    s.expr = parse_tuple();
    expect(Tok::BlockEnd);
    return s;
  }
  s.kind = SK::SetBlock;
  if (is_op("|")) s.expr = parse_filter(nullptr, false);
  expect(Tok::BlockEnd);
  s.body = subparse({"endset"});
  end_tag("endset");
  return s;
}

void Parser::parse_signature(MacroDef& m) {
  expect_op("(");
  while (!is_op(")")) {
    if (!m.params.empty()) expect_op(",");
    int line = cur().line;
    std::string name = expect_name();
    ExprPtr def;
    if (skip_op("=")) def = parse_expression();
    else if (!m.params.empty() && m.params.back().second) fail("non-default argument follows default argument", line);
    m.params.emplace_back(name, std::move(def));
  }
  expect_op(")");
}

Stmt Parser::parse_macro(int line) {
  Stmt s;
  s.kind = SK::Macro;
  s.line = line;
  s.macro = std::make_shared<MacroDef>();
  s.macro->name = expect_name();
  parse_signature(*s.macro);
  expect(Tok::BlockEnd);
  macro_stack_.push_back(s.macro.get());
  int saved_loop = loop_depth_;
  loop_depth_ = 0;
  s.macro->body = subparse({"endmacro"});
  loop_depth_ = saved_loop;
  macro_stack_.pop_back();
  if (!skip_name("endmacro")) fail("expected 'endmacro'");
  if (cur().type == Tok::Name) next();  // {% endmacro name %}
  expect(Tok::BlockEnd);
  return s;
}

Stmt Parser::parse_call_block(int line) {
  Stmt s;
  s.kind = SK::CallBlock;
  s.line = line;
  s.macro = std::make_shared<MacroDef>();
  s.macro->name = "caller";
  if (is_op("(")) parse_signature(*s.macro);
  s.expr = parse_expression();
  if (s.expr->kind != EK::Call) fail("expected call", line);
  expect(Tok::BlockEnd);
  macro_stack_.push_back(s.macro.get());
  int saved_loop = loop_depth_;
  loop_depth_ = 0;
  s.macro->body = subparse({"endcall"});
  loop_depth_ = saved_loop;
  macro_stack_.pop_back();
  end_tag("endcall");
  return s;
}

Stmt Parser::parse_filter_block(int line) {
  Stmt s;
  s.kind = SK::FilterBlock;
  s.line = line;
  s.expr = parse_filter(nullptr, true);
  expect(Tok::BlockEnd);
  s.body = subparse({"endfilter"});
  end_tag("endfilter");
  return s;
}

Stmt Parser::parse_with(int line) {
  Stmt s;
  s.kind = SK::With;
  s.line = line;
  while (cur().type != Tok::BlockEnd) {
    if (!s.assigns.empty()) expect_op(",");
    ExprPtr target = parse_assign_target(true, false, {}, false);
    expect_op("=");
    s.assigns.emplace_back(std::move(target), parse_expression());
  }
  expect(Tok::BlockEnd);
  s.body = subparse({"endwith"});
  end_tag("endwith");
  return s;
}

Stmt Parser::parse_scoped_body(int line, const std::string& end, bool named) {
  Stmt s;
  s.kind = SK::Scope;
  s.line = line;
  if (named) {
    s.text = expect_name();
    while (skip_name("scoped") || skip_name("required")) {
    }
  }
  expect(Tok::BlockEnd);
  s.body = subparse({end});
  if (!skip_name(end.c_str())) fail("expected '" + end + "'");
  if (named && cur().type == Tok::Name) next();
  expect(Tok::BlockEnd);
  return s;
}

}  // namespace tmill::jinja
