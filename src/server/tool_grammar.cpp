// The grammar of forced tool calls (tool_choice "required" or a named function): the chosen format's
// markers as literals around each function's arguments, which follow its `parameters` JSON Schema
// (grammar::json_schema_to_gbnf, one sub-grammar per function with its rules renamed apart).
#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "server/request_fields.h"
#include "server/tool_request.h"

namespace tmill::server {

namespace {

using grammar::gbnf_literal;

bool rule_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

// How one format writes calls: text before the first call, between calls, after the last; and one
// call of `name` around the GBNF expression `args`.
struct Shape {
  std::string open, sep, close;
  bool single = false;  // the format writes one call per message
  std::string (*call)(const std::string& name, const std::string& args);
  const detail::XmlTags* xml = nullptr;  // arguments as tagged text (else JSON)
};

const detail::XmlTags kQwen3CoderTags{[](const std::string& k) { return "<parameter=" + k + ">\n"; },
                                      "\n</parameter>\n"};
const detail::XmlTags kGlmTags{[](const std::string& k) { return "<arg_key>" + k + "</arg_key>\n<arg_value>"; },
                               "</arg_value>\n"};
const detail::XmlTags kMinimaxTags{[](const std::string& k) { return "<parameter name=\"" + k + "\">"; },
                                   "</parameter>\n"};

std::string lit(const std::string& s) { return gbnf_literal(s); }

std::string json_object_call(const char* name_key, const char* args_key, const std::string& name,
                             const std::string& args) {
  return lit(fmt::format("{{\"{}\": \"{}\", \"{}\": ", name_key, name, args_key)) + " " + args + " " + lit("}");
}

Result<Shape> shape_of(ToolCallFormat f, std::string_view template_source) {
  using F = ToolCallFormat;
  switch (f) {
    case F::Hermes:
      return Shape{"", "\n", "", false, [](const std::string& n, const std::string& a) {
                     return lit("<tool_call>\n{\"name\": \"" + n + "\", \"arguments\": ") + " " + a + " " +
                            lit("}\n</tool_call>");
                   }};
    case F::Llama3Json:
      return Shape{"", "; ", "", false,
                   [](const std::string& n, const std::string& a) { return json_object_call("name", "parameters", n, a); }};
    case F::Granite:
      return Shape{"<|tool_call|>[", ", ", "]", false,
                   [](const std::string& n, const std::string& a) { return json_object_call("name", "arguments", n, a); }};
    case F::FireFunction:
      return Shape{" functools[", ", ", "]", false,
                   [](const std::string& n, const std::string& a) { return json_object_call("name", "arguments", n, a); }};
    case F::Mistral:
      if (template_source.find("[ARGS]") != std::string_view::npos)
        return Shape{"", "", "", false, [](const std::string& n, const std::string& a) {
                       return lit("[TOOL_CALLS]" + n + "[ARGS]") + " " + a;
                     }};
      return Shape{"[TOOL_CALLS][", ", ", "]", false,
                   [](const std::string& n, const std::string& a) { return json_object_call("name", "arguments", n, a); }};
    case F::DeepSeekV3:
      return Shape{"<｜tool▁calls▁begin｜>", "\n", "<｜tool▁calls▁end｜>", false,
                   [](const std::string& n, const std::string& a) {
                     return lit("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + n + "\n```json\n") + " " + a + " " +
                            lit("\n```<｜tool▁call▁end｜>");
                   }};
    case F::DeepSeekV31:
      return Shape{"<｜tool▁calls▁begin｜>", "", "<｜tool▁calls▁end｜>", false,
                   [](const std::string& n, const std::string& a) {
                     return lit("<｜tool▁call▁begin｜>" + n + "<｜tool▁sep｜>") + " " + a + " " +
                            lit("<｜tool▁call▁end｜>");
                   }};
    case F::KimiK2:
      return Shape{"<|tool_calls_section_begin|>", "", "<|tool_calls_section_end|>", false,
                   [](const std::string& n, const std::string& a) {
                     return lit("<|tool_call_begin|>functions." + n + ":") + " [0-9] " +
                            lit("<|tool_call_argument_begin|>") + " " + a + " " + lit("<|tool_call_end|>");
                   }};
    case F::CommandR:
      return Shape{"<|START_ACTION|>[", ", ", "]<|END_ACTION|>", false,
                   [](const std::string& n, const std::string& a) {
                     return lit("{\"tool_call_id\": \"") + " [0-9] " + lit("\", \"tool_name\": \"" + n + "\", \"parameters\": ") +
                            " " + a + " " + lit("}");
                   }};
    case F::Functionary:
      // The generation prompt already ends with ">>>".
      return Shape{"", ">>>", "", false,
                   [](const std::string& n, const std::string& a) { return lit(n + "\n") + " " + a; }};
    case F::OpenAI:
      return Shape{"", "", "", true, [](const std::string& n, const std::string& a) {
                     return lit("<|channel|>commentary to=functions." + n + " <|constrain|>json<|message|>") + " " + a;
                   }};
    case F::Qwen3Coder:
      return Shape{"", "\n", "", false,
                   [](const std::string& n, const std::string& a) {
                     return lit("<tool_call>\n<function=" + n + ">\n") + a + " " + lit("</function>\n</tool_call>");
                   },
                   &kQwen3CoderTags};
    case F::Glm45:
      return Shape{"", "\n", "", false,
                   [](const std::string& n, const std::string& a) {
                     return lit("<tool_call>" + n + "\n") + a + " " + lit("</tool_call>");
                   },
                   &kGlmTags};
    case F::Gemma4:  // (the arguments as JSON inside Gemma's braces: its parser takes JSON's quoting too)
      return Shape{"", "", "", false, [](const std::string& n, const std::string& a) {
                     return lit("<|tool_call>call:" + n) + " " + a + " " + lit("<tool_call|>");
                   }};
    case F::MinimaxM2:
      return Shape{"<minimax:tool_call>\n", "", "</minimax:tool_call>", false,
                   [](const std::string& n, const std::string& a) {
                     return lit("<invoke name=\"" + n + "\">\n") + a + " " + lit("</invoke>\n");
                   },
                   &kMinimaxTags};
  }
  return Error{fmt::format("no grammar for the {} tool-call format", tool_call_format_name(f))};
}

}  // namespace

std::string prefix_gbnf_rules(std::string_view g, std::string_view prefix) {
  std::string out;
  out.reserve(g.size() * 2);
  size_t i = 0;
  auto copy_quoted = [&](char close) {
    out += g[i++];
    while (i < g.size() && g[i] != close) {
      if (g[i] == '\\' && i + 1 < g.size()) out += g[i++];
      out += g[i++];
    }
    if (i < g.size()) out += g[i++];
  };
  while (i < g.size()) {
    const char c = g[i];
    if (c == '#') {
      while (i < g.size() && g[i] != '\n') out += g[i++];
    } else if (c == '"') {
      copy_quoted('"');
    } else if (c == '[') {
      copy_quoted(']');
    } else if (c == '{') {
      copy_quoted('}');  // a repetition count {m,n}
    } else if (rule_char(c)) {
      out += prefix;
      while (i < g.size() && rule_char(g[i])) out += g[i++];
    } else {
      out += g[i++];
    }
  }
  return out;
}

Result<std::string> tool_call_grammar(ToolCallFormat format, const json& tools, const std::string& only, bool parallel,
                                      std::string_view template_source) {
  TM_ASSIGN_OR_RETURN(Shape shape, shape_of(format, template_source));
  std::string rules, alternatives;
  int k = 0;
  for (const json& t : tools) {
    const json& fn = t.at("function");
    const std::string name = fn.at("name").get<std::string>();
    if (!only.empty() && name != only) continue;
    const json* params = field(fn, "parameters");
    // A function without parameters takes an empty object (as OpenAI sends "{}").
    const json schema = params ? *params : json{{"type", "object"}, {"properties", json::object()},
                                                 {"additionalProperties", false}};
    const std::string p = fmt::format("tc{}-", k++);
    std::string args;
    if (shape.xml) {
      auto a = detail::xml_arguments_gbnf(schema, p, *shape.xml, &rules);
      if (!a.ok()) return Error{fmt::format("function '{}' parameters: {}", name, a.error())};
      args = std::move(a).value();
    } else {
      auto g = grammar::json_schema_to_gbnf(schema);
      if (!g.ok()) return Error{fmt::format("function '{}' parameters: {}", name, g.error())};
      rules += prefix_gbnf_rules(*g, p) + "\n";
      args = p + "root";
    }
    if (!alternatives.empty()) alternatives += " | ";
    alternatives += "( " + shape.call(name, args) + " )";
  }
  if (k == 0) return Error{"no function to call"};
  std::string root = "root ::= ";
  if (!shape.open.empty()) root += lit(shape.open) + " ";
  root += "tc-call";
  if (parallel && !shape.single) root += " ( " + (shape.sep.empty() ? "" : lit(shape.sep) + " ") + "tc-call )*";
  if (!shape.close.empty()) root += " " + lit(shape.close);
  return root + "\ntc-call ::= " + alternatives + "\n" + rules;
}

}  // namespace tmill::server
