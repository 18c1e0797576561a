// Jinja template lexer: splits a template into text and tag tokens, applying whitespace control
// ({%- -%} {{- -}} {#- -#}, {%+ +%}) and the trim_blocks / lstrip_blocks options exactly as Jinja2 does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tmill::jinja {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type = Tok::Eof;
  std::string value;  // Text/Name/String (decoded)/Op text
  int line = 1;
  int64_t ival = 0;
  double fval = 0;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Normalizes newlines (\r\n, \r -> \n), drops one trailing newline unless kept, and tokenizes.
// Raises JinjaError{"TemplateSyntaxError", ...} with the line number on malformed input.
std::vector<Token> tokenize(std::string_view source, const LexOptions& opt = {});

const char* tok_name(Tok t);

}  // namespace tmill::jinja
