// tools / tool_choice / parallel_tool_calls of a chat request: validation and the ToolPlan.
#include "server/tool_request.h"

#include <set>

#include <fmt/format.h>

#include "server/request_fields.h"

namespace tmill::server {

namespace {

bool valid_function_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
          c == '.'))
      return false;
  return true;
}

// Checks `tools` as OpenAI does; returns the function names in order.
std::vector<std::string> check_tools(const json& tools) {
  if (!tools.is_array()) throw_bad_request("'tools' must be an array of tools", "tools");
  if (tools.size() > 128) throw_bad_request("'tools' has more than 128 entries", "tools");
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string at = fmt::format("tools[{}]", i);
    if (!t.is_object()) throw_bad_request(at + " must be an object", "tools");
    const json* type = field(t, "type");
    if (!type || !type->is_string()) throw_bad_request(at + ".type is required (\"function\")", "tools");
    if (*type != "function")
      throw_bad_request(fmt::format("{}.type '{}' is not supported (only \"function\")", at, type->get<std::string>()),
                        "tools");
    const json* fn = field(t, "function");
    if (!fn || !fn->is_object()) throw_bad_request(at + ".function must be an object", "tools");
    const json* name = field(*fn, "name");
    if (!name || !name->is_string()) throw_bad_request(at + ".function.name is required (a string)", "tools");
    const std::string n = name->get<std::string>();
    if (!valid_function_name(n))
      throw_bad_request(fmt::format("{}.function.name '{}' must be 1 to 64 of a-z, A-Z, 0-9, '_', '-', '.'", at, n),
                        "tools");
    if (!seen.insert(n).second) throw_bad_request(fmt::format("{}: function name '{}' is repeated", at, n), "tools");
    if (const json* d = field(*fn, "description"); d && !d->is_string())
      throw_bad_request(at + ".function.description must be a string", "tools");
    if (const json* p = field(*fn, "parameters"); p && !p->is_object())
      throw_bad_request(at + ".function.parameters must be a JSON Schema object", "tools");
    if (const json* s = field(*fn, "strict"); s && !s->is_boolean())
      throw_bad_request(at + ".function.strict must be a boolean", "tools");
    names.push_back(n);
  }
  return names;
}

}  // namespace

ToolPlan map_tools(const json& body, std::optional<ToolCallFormat> parser, std::string_view template_source,
                   GenerateRequest& r) {
  ToolPlan plan;
  const json* tools = field(body, "tools");
  std::vector<std::string> names;
  if (tools) {
    names = check_tools(*tools);
    if (names.empty()) tools = nullptr;  // [] is no tools
  }
  plan.parallel = opt_bool(body, "parallel_tool_calls").value_or(true);
  plan.choice = tools ? ToolPlan::Choice::Auto : ToolPlan::Choice::None;
  if (const json* choice = field(body, "tool_choice")) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none") plan.choice = ToolPlan::Choice::None;
      else if (c == "auto") plan.choice = ToolPlan::Choice::Auto;
      else if (c == "required") plan.choice = ToolPlan::Choice::Required;
      else throw_bad_request(fmt::format("tool_choice '{}' is not one of \"none\", \"auto\", \"required\"", c), "tool_choice");
    } else if (choice->is_object()) {
      const json* type = field(*choice, "type");
      const json* fn = field(*choice, "function");
      const json* name = fn && fn->is_object() ? field(*fn, "name") : nullptr;
      if (!type || *type != "function" || !name || !name->is_string())
        throw_bad_request("tool_choice must be \"none\", \"auto\", \"required\" or "
                          "{\"type\": \"function\", \"function\": {\"name\": ...}}",
                          "tool_choice");
      plan.choice = ToolPlan::Choice::Named;
      plan.named = name->get<std::string>();
      if (std::find(names.begin(), names.end(), plan.named) == names.end())
        throw_bad_request(fmt::format("tool_choice names function '{}', which is not in 'tools'", plan.named),
                          "tool_choice");
    } else {
      throw_bad_request("tool_choice must be a string or an object", "tool_choice");
    }
    if (!tools && (plan.choice == ToolPlan::Choice::Required))
      throw_bad_request("tool_choice 'required' needs 'tools'", "tool_choice");
  }
  if (plan.choice == ToolPlan::Choice::None || !tools) return plan;  // "auto" without tools: nothing to call

  plan.parse = true;
  plan.format = parser ? *parser : detect_tool_call_format(template_source);
  plan.tools = std::make_shared<const json>(*tools);
  if (tool_call_markers_are_special(plan.format) && !field(body, "skip_special_tokens"))
    r.skip_special_tokens = false;  // the markers must reach the parser

  if (plan.choice == ToolPlan::Choice::Required || plan.choice == ToolPlan::Choice::Named) {
    if (r.constraint.active())
      throw_bad_request(fmt::format("tool_choice '{}' cannot be combined with another output constraint ({})",
                                    plan.choice == ToolPlan::Choice::Named ? plan.named : "required",
                                    r.constraint.field),
                        "tool_choice");
    auto gbnf = tool_call_grammar(plan.format, *tools, plan.named, plan.parallel, template_source);
    if (!gbnf.ok()) throw_bad_request("tool_choice: " + gbnf.error(), "tool_choice");
    r.constraint.kind = OutputConstraint::Kind::Grammar;
    r.constraint.text = std::move(gbnf).value();
    r.constraint.field = "tool_choice";
  }
  return plan;
}

}  // namespace tmill::server
