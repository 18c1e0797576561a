// OpenAI tool calling on /v1/chat/completions, request side: `tools` (validated), `tool_choice`
// ("none", "auto", "required", {"type":"function","function":{"name"}}) and `parallel_tool_calls`, the
// tool-call format of the chat template (or --tool-call-parser), and for "required" / a named function
// the grammar that makes the model write calls in that format (arguments following each function's
// `parameters` schema), set as the request's OutputConstraint.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "chat/tool_calls.h"
#include "core/result.h"
#include "engine/engine.h"
#include "server/api_error.h"

namespace tmill::server {

struct ToolPlan {
  enum class Choice : uint8_t { None, Auto, Required, Named };
  Choice choice = Choice::None;
  bool parse = false;  // read tool calls from the output (tools given and tool_choice not "none")
  ToolCallFormat format = ToolCallFormat::Hermes;
  std::shared_ptr<const json> tools;  // the request's tools array (types XML-style argument values)
  std::string named;                  // Choice::Named: the function
  bool parallel = true;               // parallel_tool_calls
};

// Reads and checks the tool fields of a chat request (400s name the field: "tools", "tool_choice",
// "parallel_tool_calls"); `parser` is --tool-call-parser, else the format comes from
// `template_source`. For "required" / a named function sets r.constraint to the calls' grammar; when the
// format's markers are special tokens, keeps them in the text (skip_special_tokens false unless the
// request sets it). Throws RequestError.
ToolPlan map_tools(const json& body, std::optional<ToolCallFormat> parser, std::string_view template_source,
                   GenerateRequest& r);

// GBNF for one or more calls (exactly one unless `parallel`) in `format`, of the functions in `tools`
// (only `only` when not empty). Errors name what cannot be enforced (a schema keyword).
Result<std::string> tool_call_grammar(ToolCallFormat format, const json& tools, const std::string& only, bool parallel,
                                      std::string_view template_source);

// `gbnf` with every rule name prefixed by `prefix` (to put several generated grammars in one).
std::string prefix_gbnf_rules(std::string_view gbnf, std::string_view prefix);

namespace detail {
// Formats that write each argument as tagged text (Qwen3-Coder, GLM, MiniMax): the tags around one.
struct XmlTags {
  std::string (*open)(const std::string& key);
  std::string close;
};
// The GBNF sequence of a function's arguments in such a format: each property of `parameters` in
// the schema's order (required ones always, others optionally), a string property as raw text (its
// enum, const, pattern, minLength/maxLength enforced), any other as compact JSON of its schema.
// Rules go to *rules, named with `prefix`. Errors name what cannot be enforced in this form.
Result<std::string> xml_arguments_gbnf(const json& parameters, const std::string& prefix, const XmlTags& tags,
                                       std::string* rules);
}  // namespace detail

}  // namespace tmill::server
