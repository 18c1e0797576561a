// Structured-output request fields -> the engine's OutputConstraint. Every spelling the anchors
// accept maps to one constraint:
//   OpenAI        response_format {"type":"text"|"json_object"|"json_schema","json_schema":{"name","schema","strict"}}
//   vLLM          structured_outputs {"json"|"regex"|"choice"|"grammar"|"json_object"}, and the older
//                 guided_json / guided_regex / guided_choice / guided_grammar
//   llama-server  json_schema (a schema object), grammar (GBNF), response_format {"type":"json_object","schema"}
// Two of them in one request is a 400 (which one wins is not obvious); whether the constraint
// compiles is the engine's check (Engine::check), whose error names the field given here.
#include <fmt/format.h>

#include "server/openai_request.h"
#include "server/request_fields.h"

namespace tmill::server::detail {

namespace {

using Kind = OutputConstraint::Kind;

// A schema given as a JSON object (or boolean), or as a string holding JSON (vLLM accepts both).
std::string schema_text(const json& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) {
    json parsed = json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean()))
      throw_bad_request(fmt::format("'{}' must be a JSON Schema (an object, or a string holding one)", field), field);
    return parsed.dump();
  }
  throw_bad_request(fmt::format("'{}' must be a JSON Schema object", field), field);
}

std::string string_of(const json& v, const std::string& field) {
  if (!v.is_string()) throw_bad_request(fmt::format("'{}' must be a string", field), field);
  std::string s = v.get<std::string>();
  if (s.empty()) throw_bad_request(fmt::format("'{}' must not be empty", field), field);
  return s;
}

std::vector<std::string> choices_of(const json& v, const std::string& field) {
  if (!v.is_array() || v.empty())
    throw_bad_request(fmt::format("'{}' must be a non-empty array of strings", field), field);
  std::vector<std::string> out;
  for (const json& c : v) {
    if (!c.is_string()) throw_bad_request(fmt::format("'{}' must be a non-empty array of strings", field), field);
    out.push_back(c.get<std::string>());
  }
  return out;
}

OutputConstraint make(Kind kind, std::string field) {
  OutputConstraint c;
  c.kind = kind;
  c.field = std::move(field);
  return c;
}

std::optional<OutputConstraint> from_response_format(const json& rf) {
  if (!rf.is_object()) throw_bad_request("'response_format' must be an object", "response_format");
  const std::string type = opt_string(rf, "type").value_or("");
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    // llama-server lets json_object carry a schema.
    if (const json* s = field(rf, "schema")) {
      OutputConstraint c = make(Kind::JsonSchema, "response_format");
      c.text = schema_text(*s, "response_format");
      return c;
    }
    return make(Kind::JsonObject, "response_format");
  }
  if (type == "json_schema") {
    const json* js = field(rf, "json_schema");
    if (!js || !js->is_object())
      throw_bad_request("response_format 'json_schema' needs a 'json_schema' object with 'name' and 'schema'",
                        "response_format");
    (void)opt_string(*js, "name");  // OpenAI requires it; vLLM does not: type-checked only
    (void)opt_bool(*js, "strict");  // schemas are always enforced strictly here
    const json* s = field(*js, "schema");
    if (!s) return make(Kind::JsonObject, "response_format");  // no schema: any JSON object
    OutputConstraint c = make(Kind::JsonSchema, "response_format");
    c.text = schema_text(*s, "response_format");
    return c;
  }
  throw_bad_request(fmt::format("response_format type '{}' is not supported (one of 'text', 'json_object', "
                                "'json_schema')",
                                type),
                    "response_format");
}

std::optional<OutputConstraint> from_structured_outputs(const json& so) {
  if (!so.is_object()) throw_bad_request("'structured_outputs' must be an object", "structured_outputs");
  std::optional<OutputConstraint> out;
  auto set = [&](OutputConstraint c, const char* key) {
    if (out)
      throw_bad_request(fmt::format("'structured_outputs' may set only one of json, regex, choice, grammar, "
                                    "json_object (got '{}' and another)",
                                    key),
                        "structured_outputs");
    out = std::move(c);
  };
  const std::string f = "structured_outputs";
  if (const json* v = field(so, "json")) {
    OutputConstraint c = make(Kind::JsonSchema, f);
    c.text = schema_text(*v, f + ".json");
    set(std::move(c), "json");
  }
  if (const json* v = field(so, "regex")) {
    OutputConstraint c = make(Kind::Regex, f);
    c.text = string_of(*v, f + ".regex");
    set(std::move(c), "regex");
  }
  if (const json* v = field(so, "choice")) {
    OutputConstraint c = make(Kind::Choice, f);
    c.choices = choices_of(*v, f + ".choice");
    set(std::move(c), "choice");
  }
  if (const json* v = field(so, "grammar")) {
    OutputConstraint c = make(Kind::Grammar, f);
    c.text = string_of(*v, f + ".grammar");
    set(std::move(c), "grammar");
  }
  if (opt_bool(so, "json_object").value_or(false)) set(make(Kind::JsonObject, f), "json_object");
  for (const char* unsupported : {"structural_tag", "whitespace_pattern"})
    if (field(so, unsupported))
      throw_bad_request(fmt::format("structured_outputs '{}' is not supported", unsupported), "structured_outputs");
  (void)opt_bool(so, "disable_any_whitespace");  // accepted: generation is compact already
  return out;
}

}  // namespace

OutputConstraint map_structured_output(const json& body) {
  std::optional<OutputConstraint> found;
  std::string found_field;
  auto take = [&](std::optional<OutputConstraint> c, const char* name) {
    if (!c) return;
    if (found)
      throw_bad_request(fmt::format("'{}' and '{}' both constrain the output; give only one", found_field, name), name);
    found = std::move(c);
    found_field = name;
  };
  if (const json* rf = field(body, "response_format")) take(from_response_format(*rf), "response_format");
  if (const json* so = field(body, "structured_outputs")) take(from_structured_outputs(*so), "structured_outputs");
  if (const json* v = field(body, "guided_json")) {
    OutputConstraint c = make(Kind::JsonSchema, "guided_json");
    c.text = schema_text(*v, "guided_json");
    take(std::move(c), "guided_json");
  }
  if (const json* v = field(body, "guided_regex")) {
    OutputConstraint c = make(Kind::Regex, "guided_regex");
    c.text = string_of(*v, "guided_regex");
    take(std::move(c), "guided_regex");
  }
  if (const json* v = field(body, "guided_choice")) {
    OutputConstraint c = make(Kind::Choice, "guided_choice");
    c.choices = choices_of(*v, "guided_choice");
    take(std::move(c), "guided_choice");
  }
  if (const json* v = field(body, "guided_grammar")) {
    OutputConstraint c = make(Kind::Grammar, "guided_grammar");
    c.text = string_of(*v, "guided_grammar");
    take(std::move(c), "guided_grammar");
  }
  if (const json* v = field(body, "json_schema")) {  // llama-server
    OutputConstraint c = make(Kind::JsonSchema, "json_schema");
    c.text = schema_text(*v, "json_schema");
    take(std::move(c), "json_schema");
  }
  if (const json* v = field(body, "grammar")) {  // llama-server
    OutputConstraint c = make(Kind::Grammar, "grammar");
    c.text = string_of(*v, "grammar");
    take(std::move(c), "grammar");
  }
  if (field(body, "guided_whitespace_pattern"))
    throw_bad_request("'guided_whitespace_pattern' is not supported", "guided_whitespace_pattern");
  (void)opt_string(body, "guided_decoding_backend");  // accepted: there is one backend
  return found ? std::move(*found) : OutputConstraint{};
}

}  // namespace tmill::server::detail
