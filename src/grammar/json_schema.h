// Translators to GBNF (the one input compile_gbnf() takes): JSON Schema, any JSON value/object,
// regular expressions, choice lists. Each returns GBNF text whose root rule is "root", or an error
// that names what cannot be enforced (a keyword, a pattern construct): never a silently weaker grammar.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace tmill::grammar {

struct JsonOptions {
  // Whitespace between JSON tokens: compact (none; what generation wants) or flexible (what
  // JSON allows, for checking text written by others, e.g. Python's json.dumps ", " / ": ").
  // Flexible mode also accepts integers written as 3.0 (JSON Schema counts them as integers).
  bool flexible_whitespace = false;
  // Property order: the schema's (what generation wants: deterministic, and what OpenAI's strict
  // mode emits), or, for checking text written by others, optional declared properties anywhere
  // among the others (required ones keep the schema's order; a repeated optional key is accepted,
  // as JSON parsers keep the last).
  bool any_order = false;
};

// JSON Schema (draft 2020-12 as used in practice) to GBNF. Unsupported or unenforceable keywords are
// errors naming the keyword and where it is ("unsupported keyword 'patternProperties' at
// /properties/a").
// Properties are enforced in the schema's order, so pass the schema as nlohmann::ordered_json (or
// as text); the nlohmann::json overload sees the keys sorted.
Result<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonOptions& opt = {});
Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema, const JsonOptions& opt = {});
Result<std::string> json_schema_text_to_gbnf(std::string_view schema_text, const JsonOptions& opt = {});
// Any JSON object ({"type":"json_object"}).
std::string json_object_gbnf(const JsonOptions& opt = {});
// A regular expression (the whole output matches it; ECMAScript / Python `re` syntax as used in
// JSON Schema "pattern": classes, escapes \d \w \s, groups, alternation, ?*+{m,n}, anchors at the
// ends). Unsupported constructs (backreferences, lookaround) are errors.
Result<std::string> regex_to_gbnf(std::string_view pattern);
// Exactly one of the strings.
std::string choices_to_gbnf(const std::vector<std::string>& choices);
// A GBNF string literal for arbitrary bytes ("..." with escapes).
std::string gbnf_literal(std::string_view bytes);

}  // namespace tmill::grammar
