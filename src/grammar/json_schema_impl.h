// The JSON Schema -> GBNF compiler's internals, shared by json_schema*.cpp. One Compiler per call;
// it walks the schema, emits rules into a RuleSet and returns GBNF expressions. A schema that no
// value satisfies is kNever (dropped from alternatives; an error where it is required).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "grammar/gbnf_text.h"
#include "grammar/json_schema.h"

namespace tmill::grammar::detail {

using Json = nlohmann::ordered_json;

inline const std::string kNever = "!never";
// Internal keyword (from "not": {"enum": [strings]}): a string that is none of these.
inline constexpr const char* kNotInKeyword = "$tokenmill:notIn";

// Keywords that constrain values: the ones the compiler enforces and the ones it must refuse.
bool is_supported_keyword(const std::string& k);
bool is_unsupported_keyword(const std::string& k, const Json& v, const Json& schema);
// True when the object schema has any keyword that constrains values (annotations do not).
bool has_constraints(const Json& s);

std::string pointer_append(const std::string& ptr, const std::string& token);

class Compiler {
 public:
  Compiler(const Json& root, const JsonOptions& opt);
  Result<std::string> run();

  // A GBNF expression for values valid against s (at JSON pointer ptr), or kNever.
  Result<std::string> gen(const Json& s, const std::string& ptr, int depth);

  // Shared rules.
  std::string ws();             // "" (compact) or "ws "
  std::string sep();            // between items: "," with whitespace as the options say
  std::string colon();
  std::string any_value();
  std::string any_string();
  std::string json_char();      // one canonical JSON string character
  std::string tok(const std::string& lit_text);  // literal

  // json_schema_merge.cpp
  Result<Json> resolve_ref(const std::string& ref, const std::string& ptr) const;
  Result<Json> resolve_top(const Json& s, const std::string& ptr, int depth) const;  // follows a top-level $ref
  Result<Json> merge(const Json& a, const Json& b, const std::string& ptr, int depth) const;

  // json_schema_number.cpp
  Result<std::string> gen_number(const Json& s, const std::string& ptr, bool integer);
  // json_schema_object.cpp
  Result<std::string> gen_object(const Json& s, const std::string& ptr, int depth);
  Result<std::string> key_not_in(const std::vector<std::string>& names);
  // json_schema_string.cpp
  Result<std::string> gen_string(const Json& s, const std::string& ptr);
  Result<std::string> gen_array(const Json& s, const std::string& ptr, int depth);
  std::string value_literal(const Json& v);

  RuleSet& rules() { return rules_; }
  const JsonOptions& options() const { return opt_; }

 private:
  Result<std::string> gen_body(const Json& s, const std::string& ptr, int depth);
  Result<std::string> gen_ref(const std::string& ref, const std::string& ptr, int depth);
  Result<std::string> gen_alternatives(const Json& s, const std::string& ptr, int depth);
  Result<std::string> gen_enum(const Json& s, const std::string& ptr);
  Result<std::string> gen_types(const Json& s, const std::string& ptr, int depth);
  Result<std::optional<Json>> negate(const Json& n, const std::string& ptr, int depth) const;

  const Json& root_;
  JsonOptions opt_;
  bool ref_siblings_ignored_ = false;  // drafts 3-7: keywords beside "$ref" are ignored
  RuleSet rules_;
  std::unordered_map<std::string, std::string> memo_;      // schema text -> expression
  std::unordered_map<std::string, std::string> ref_rules_;  // "$ref" value -> rule
  std::map<std::string, std::string> shared_;               // shared rules by role
};

// Is v valid against s? nullopt when s uses a keyword this small checker cannot evaluate for v.
std::optional<bool> quick_validate(const Json& v, const Json& s);

}  // namespace tmill::grammar::detail
