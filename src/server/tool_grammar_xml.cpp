// Forced tool calls in the formats that write each argument as tagged text (Qwen3-Coder, GLM-4.5,
// MiniMax-M2): the arguments' grammar built property by property from the `parameters` schema.
#include <set>

#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "server/request_fields.h"
#include "server/tool_request.h"

namespace tmill::server::detail {

namespace {

using grammar::gbnf_literal;

// A sub-grammar (root rule "root") renamed under `prefix`, its rules appended; returns its root.
std::string embed(const std::string& gbnf, const std::string& prefix, std::string* rules) {
  *rules += prefix_gbnf_rules(gbnf, prefix) + "\n";
  return prefix + "root";
}

bool string_only(const json& p) {
  if (const json* t = field(p, "type")) return *t == "string";
  const json* e = field(p, "enum");
  if (e && e->is_array() && !e->empty())
    return std::all_of(e->begin(), e->end(), [](const json& v) { return v.is_string(); });
  const json* c = field(p, "const");
  return c && c->is_string();
}

// One property's value: raw text for a string, compact JSON otherwise.
Result<std::string> value_gbnf(const json& p, const std::string& key, const std::string& prefix, std::string* rules) {
  if (!p.is_object()) return Error{fmt::format("parameter '{}': its schema must be an object", key)};
  if (!string_only(p)) {
    auto g = grammar::json_schema_to_gbnf(p);
    if (!g.ok()) return Error{fmt::format("parameter '{}': {}", key, g.error())};
    return embed(*g, prefix, rules);
  }
  static const std::set<std::string> kAllowed = {"type",    "description", "title",     "enum",    "const",
                                                 "pattern", "minLength",   "maxLength", "default", "examples"};
  for (auto it = p.begin(); it != p.end(); ++it)
    if (!kAllowed.count(it.key()))
      return Error{fmt::format("keyword '{}' of parameter '{}' cannot be enforced on a tagged-text argument", it.key(),
                               key)};
  if (const json* e = field(p, "enum")) {
    if (!e->is_array()) return Error{fmt::format("parameter '{}': enum must be an array", key)};
    std::string alts;
    for (const json& v : *e) {
      if (!v.is_string()) continue;  // a non-string value cannot be a string
      alts += (alts.empty() ? "" : " | ") + gbnf_literal(v.get<std::string>());
    }
    if (alts.empty()) return Error{fmt::format("parameter '{}': no string in its enum", key)};
    return "( " + alts + " )";
  }
  if (const json* c = field(p, "const")) {
    if (!c->is_string()) return Error{fmt::format("parameter '{}': const is not a string", key)};
    return gbnf_literal(c->get<std::string>());
  }
  const json* pattern = field(p, "pattern");
  const json* min = field(p, "minLength");
  const json* max = field(p, "maxLength");
  if (pattern) {
    if (min || max)
      return Error{fmt::format("parameter '{}': pattern together with minLength/maxLength cannot be enforced on a "
                               "tagged-text argument",
                               key)};
    if (!pattern->is_string()) return Error{fmt::format("parameter '{}': pattern must be a string", key)};
    auto g = grammar::regex_to_gbnf(pattern->get<std::string>());
    if (!g.ok()) return Error{fmt::format("parameter '{}' pattern: {}", key, g.error())};
    return embed(*g, prefix, rules);
  }
  // Any text without '<' (the closing tag starts with it).
  const int64_t lo = min && min->is_number_unsigned() ? min->get<int64_t>() : 0;
  if (max && max->is_number_unsigned()) return fmt::format("[^<]{{{},{}}}", lo, max->get<int64_t>());
  return lo > 0 ? fmt::format("[^<]{{{},}}", lo) : std::string("[^<]*");
}

}  // namespace

Result<std::string> xml_arguments_gbnf(const json& schema, const std::string& prefix, const XmlTags& tags,
                                       std::string* rules) {
  if (!schema.is_object()) return Error{"parameters must be a JSON Schema object"};
  static const std::set<std::string> kTop = {"type",  "properties", "required", "additionalProperties",
                                             "title", "description", "$schema"};
  for (auto it = schema.begin(); it != schema.end(); ++it)
    if (!kTop.count(it.key()))
      return Error{fmt::format("keyword '{}' of parameters cannot be enforced on tagged-text arguments", it.key())};
  if (const json* t = field(schema, "type"); t && *t != "object") return Error{"parameters must be of type object"};
  std::set<std::string> required;
  if (const json* r = field(schema, "required")) {
    if (!r->is_array()) return Error{"parameters: required must be an array"};
    for (const json& k : *r)
      if (k.is_string()) required.insert(k.get<std::string>());
  }
  const json* props = field(schema, "properties");
  if (props && !props->is_object()) return Error{"parameters: properties must be an object"};
  for (const std::string& k : required)
    if (!props || !props->contains(k))
      return Error{fmt::format("parameters: required property '{}' is not in properties", k)};
  std::string seq;
  int i = 0;
  if (props)
    for (auto it = props->begin(); it != props->end(); ++it, ++i) {
      const std::string rule = fmt::format("{}p{}", prefix, i);
      TM_ASSIGN_OR_RETURN(std::string value, value_gbnf(it.value(), it.key(), rule + "-", rules));
      *rules += rule + " ::= " + gbnf_literal(tags.open(it.key())) + " " + value + " " + gbnf_literal(tags.close) + "\n";
      seq += " " + rule + (required.count(it.key()) ? "" : "?");
    }
  return seq;
}

}  // namespace tmill::server::detail
