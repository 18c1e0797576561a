// What a request's output must match (structured output): a JSON Schema, any JSON object, a regular
// expression, a list of choices, or a GBNF grammar (llama.cpp's format). Plain data: the engine
// compiles it against its vocabulary (src/grammar/), caching compiled grammars by their text, and
// refuses a constraint that does not compile (RequestProblem naming `field`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tmill {

struct OutputConstraint {
  enum class Kind : uint8_t { None, JsonObject, JsonSchema, Regex, Choice, Grammar };
  Kind kind = Kind::None;
  std::string text;                  // JsonSchema: the schema as JSON text; Regex: the pattern; Grammar: GBNF
  std::vector<std::string> choices;  // Choice: the output is exactly one of these
  // JSON kinds: allow whitespace between JSON tokens. Default compact (what generation wants);
  // flexible when checking text written by others.
  bool flexible_whitespace = false;
  // The constraint starts once the output contains this text (e.g. "</think>" after a reasoning
  // model's thoughts); the output before it and the text itself are free. Empty: from the first token.
  std::string after;
  // The request field a front end names when the constraint is refused ("response_format", "tools", ...).
  std::string field = "response_format";

  bool active() const { return kind != Kind::None; }
};

inline std::string_view to_string(OutputConstraint::Kind k) {
  switch (k) {
    case OutputConstraint::Kind::None: return "none";
    case OutputConstraint::Kind::JsonObject: return "json_object";
    case OutputConstraint::Kind::JsonSchema: return "json_schema";
    case OutputConstraint::Kind::Regex: return "regex";
    case OutputConstraint::Kind::Choice: return "choice";
    case OutputConstraint::Kind::Grammar: return "grammar";
  }
  return "?";
}

}  // namespace tmill
