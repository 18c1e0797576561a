// Tool calling in the server: tools / tool_choice / parallel_tool_calls mapping and its 400s, the
// grammar of forced calls (compiled, accepting what the format's parser reads back, refusing other
// functions and extra calls), and message.tool_calls / delta.tool_calls.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "grammar/grammar.h"
#include "server/openai_request.h"
#include "server/request_fields.h"
#include "server/tool_request.h"
#include "server/tool_response.h"
#include "server_test_data.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {

using test::stories_tokenizer;

ServerContext context() {
  ServerContext c;
  c.served_model_name = "stories";
  c.tokenizer = stories_tokenizer();
  auto t = ChatTemplate::parse(fallback_chat_template());
  c.chat_template = std::make_shared<const ChatTemplate>(std::move(t).value());
  c.max_model_len = 512;
  c.n_vocab = c.tokenizer->n_vocab();
  c.max_tokens_default = 20;
  return c;
}

json J(const char* s) { return json::parse(s); }

const char* kTools = R"([{"type":"function","function":{"name":"get_weather","description":"d",
  "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],
  "additionalProperties":false}}},
  {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{
  "zone":{"enum":["utc","cet"]}},"required":["zone"],"additionalProperties":false}}}])";

json chat_body(const char* extra) {
  json b = J(R"({"messages":[{"role":"user","content":"weather?"}]})");
  b["tools"] = J(kTools);
  const json e = J(extra);
  for (auto it = e.begin(); it != e.end(); ++it) b[it.key()] = it.value();
  return b;
}

MappedRequest chat_ok(const json& body, const ServerContext& c = context()) {
  ApiError err;
  auto r = map_chat_request(body, c, &err);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? std::move(r).value() : MappedRequest{};
}

ApiError chat_err(const json& body) {
  ApiError err;
  auto r = map_chat_request(body, context(), &err);
  EXPECT_FALSE(r.ok()) << body.dump();
  return err;
}

// A vocabulary of all single bytes (and EOS) so any text can be fed byte by byte.
std::shared_ptr<const grammar::Vocabulary> byte_vocab() {
  static auto v = [] {
    grammar::VocabularyData d;
    for (int b = 0; b < 256; ++b) d.token_bytes.push_back(std::string(1, static_cast<char>(b)));
    d.token_bytes.push_back("");
    d.eos_tokens.push_back(256);
    return grammar::Vocabulary::create(std::move(d));
  }();
  return v;
}

bool grammar_accepts(const std::string& gbnf, const std::string& text) {
  auto g = grammar::compile_gbnf(gbnf, byte_vocab());
  EXPECT_TRUE(g.ok()) << g.error() << "\n" << gbnf;
  if (!g.ok()) return false;
  grammar::Matcher m(*g);
  return m.accept_bytes(text) && m.accepting();
}

}  // namespace

TEST(ToolMapping, DefaultsAndChoices) {
  MappedRequest m = chat_ok(chat_body("{}"));
  EXPECT_TRUE(m.tools.parse);
  EXPECT_EQ(m.tools.choice, ToolPlan::Choice::Auto);
  EXPECT_EQ(m.tools.format, ToolCallFormat::Hermes) << "the ChatML fallback uses hermes";
  EXPECT_FALSE(m.prompts[0].request.constraint.active()) << "auto constrains nothing";
  EXPECT_FALSE(m.prompts[0].request.skip_special_tokens) << "markers may be special tokens (as vLLM)";

  m = chat_ok(chat_body(R"({"tool_choice":"none"})"));
  EXPECT_FALSE(m.tools.parse);
  EXPECT_TRUE(m.prompts[0].request.skip_special_tokens) << "no parsing: the request as it was";
  EXPECT_FALSE(m.prompts[0].request.constraint.active());

  m = chat_ok(chat_body(R"({"tool_choice":"required"})"));
  EXPECT_EQ(m.tools.choice, ToolPlan::Choice::Required);
  const OutputConstraint& c = m.prompts[0].request.constraint;
  EXPECT_EQ(c.kind, OutputConstraint::Kind::Grammar);
  EXPECT_EQ(c.field, "tool_choice");
  EXPECT_TRUE(grammar_accepts(c.text, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\":\"utc\"}}\n"
                                      "</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                      "{\"city\":\"Oslo\"}}\n</tool_call>"));

  m = chat_ok(chat_body(R"({"tool_choice":{"type":"function","function":{"name":"get_time"}},"parallel_tool_calls":false})"));
  EXPECT_EQ(m.tools.choice, ToolPlan::Choice::Named);
  EXPECT_EQ(m.tools.named, "get_time");
  EXPECT_FALSE(m.tools.parallel);
  const std::string& g = m.prompts[0].request.constraint.text;
  const std::string one = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\":\"cet\"}}\n</tool_call>";
  EXPECT_TRUE(grammar_accepts(g, one));
  EXPECT_FALSE(grammar_accepts(g, one + "\n" + one)) << "parallel_tool_calls false: one call";
  EXPECT_FALSE(grammar_accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"x\"}}\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\":\"pst\"}}\n</tool_call>"))
      << "arguments follow the parameters schema";

  // No tools: tool_choice none/auto are fine; a function without parameters takes {}.
  json b = J(R"({"messages":[{"role":"user","content":"hi"}],"tool_choice":"auto"})");
  EXPECT_FALSE(chat_ok(b).tools.parse);
  b = chat_body(R"({"tool_choice":"required"})");
  b["tools"] = J(R"([{"type":"function","function":{"name":"ping"}}])");
  m = chat_ok(b);
  EXPECT_TRUE(grammar_accepts(m.prompts[0].request.constraint.text,
                              "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}\n</tool_call>"));
}

TEST(ToolMapping, ParserFlagAndSpecialMarkers) {
  ServerContext c = context();
  c.tool_call_parser = ToolCallFormat::Mistral;
  MappedRequest m = chat_ok(chat_body(R"({"tool_choice":"auto"})"), c);
  EXPECT_EQ(m.tools.format, ToolCallFormat::Mistral);
  EXPECT_FALSE(m.prompts[0].request.skip_special_tokens) << "[TOOL_CALLS] must reach the parser";
  m = chat_ok(chat_body(R"({"skip_special_tokens":true})"), c);
  EXPECT_TRUE(m.prompts[0].request.skip_special_tokens) << "the request's own choice wins";
  // A request's chat_template decides the format when no parser is forced.
  json b = chat_body("{}");
  b["chat_template"] = "{% for m in messages %}{{ m.content }}{% endfor %}{# <|python_tag|> #}";
  EXPECT_EQ(chat_ok(b).tools.format, ToolCallFormat::Llama3Json);
  // Tagged-text (XML) arguments: what cannot be written that way is a 400 naming the keyword.
  c.tool_call_parser = ToolCallFormat::Qwen3Coder;
  EXPECT_TRUE(chat_ok(chat_body(R"({"tool_choice":"required"})"), c).prompts[0].request.constraint.active());
  b = chat_body(R"({"tool_choice":"required"})");
  b["tools"][0]["function"]["parameters"]["anyOf"] = J(R"([{"required":["city"]}])");
  ApiError err;
  EXPECT_FALSE(map_chat_request(b, c, &err).ok());
  EXPECT_EQ(err.param, "tool_choice");
  EXPECT_NE(err.message.find("'anyOf'"), std::string::npos) << err.message;
  // Combined with another output constraint.
  b = chat_body(R"({"tool_choice":"required","response_format":{"type":"json_object"}})");
  EXPECT_EQ(chat_err(b).param, "tool_choice");
}

TEST(ToolMapping, BadToolsAndChoicesAre400s) {
  struct Case {
    const char* tools;
    const char* extra;
    const char* param;
    const char* says;
  };
  const Case cases[] = {
      {R"({"a":1})", "{}", "tools", "must be an array"},
      {R"([1])", "{}", "tools", "tools[0] must be an object"},
      {R"([{"type":"retrieval"}])", "{}", "tools", "only \"function\""},
      {R"([{"type":"function"}])", "{}", "tools", "tools[0].function must be an object"},
      {R"([{"type":"function","function":{"name":"a b"}}])", "{}", "tools", "'a b'"},
      {R"([{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}])", "{}", "tools",
       "repeated"},
      {R"([{"type":"function","function":{"name":"f","parameters":[]}}])", "{}", "tools", "parameters"},
      {nullptr, R"({"tool_choice":"always"})", "tool_choice", "always"},
      {nullptr, R"({"tool_choice":{"type":"function","function":{"name":"nope"}}})", "tool_choice", "'nope'"},
      {nullptr, R"({"tool_choice":{"type":"function"}})", "tool_choice", "tool_choice must be"},
      {nullptr, R"({"tool_choice":3})", "tool_choice", "string or an object"},
      {nullptr, R"({"parallel_tool_calls":"yes"})", "parallel_tool_calls", ""},
      {R"J([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","pattern":"(?=x)"}}}}}])J",
       R"({"tool_choice":"required"})", "tool_choice", "function 'f' parameters"},
  };
  for (const Case& c : cases) {
    json b = chat_body(c.extra);
    if (c.tools) b["tools"] = J(c.tools);
    SCOPED_TRACE(b.dump());
    ApiError e = chat_err(b);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, c.param);
    EXPECT_NE(e.message.find(c.says), std::string::npos) << e.message;
  }
  json b = J(R"({"messages":[{"role":"user","content":"hi"}],"tool_choice":"required"})");
  EXPECT_EQ(chat_err(b).param, "tool_choice");
}

// Every format with a grammar accepts the text its parser reads back as the same call.
TEST(ToolGrammar, EachFormatAgreesWithItsParser) {
  const json tools = J(kTools);
  const std::string args = R"({"city":"Paris"})";
  struct Case {
    ToolCallFormat f;
    const char* tmpl;
    std::string text;
  };
  const Case cases[] = {
      {ToolCallFormat::Hermes, "", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + args + "}\n</tool_call>"},
      {ToolCallFormat::Llama3Json, "", "{\"name\": \"get_weather\", \"parameters\": " + args + "}"},
      {ToolCallFormat::Granite, "", "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": " + args + "}]"},
      {ToolCallFormat::FireFunction, "", " functools[{\"name\": \"get_weather\", \"arguments\": " + args + "}]"},
      {ToolCallFormat::Mistral, "", "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " + args + "}]"},
      {ToolCallFormat::Mistral, "[ARGS]", "[TOOL_CALLS]get_weather[ARGS]" + args},
      {ToolCallFormat::DeepSeekV3, "",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" + args +
           "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::DeepSeekV31, "",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" + args +
           "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolCallFormat::KimiK2, "",
       "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>" + args +
           "<|tool_call_end|><|tool_calls_section_end|>"},
      {ToolCallFormat::CommandR, "",
       "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": " + args +
           "}]<|END_ACTION|>"},
      {ToolCallFormat::Functionary, "", "get_weather\n" + args},
      {ToolCallFormat::OpenAI, "", "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + args},
      {ToolCallFormat::Qwen3Coder, "",
       "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"},
      {ToolCallFormat::Glm45, "", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"},
      {ToolCallFormat::MinimaxM2, "",
       "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Paris</parameter>\n</invoke>\n"
       "</minimax:tool_call>"},
      // (Gemma 4: JSON inside its call braces, which its parser reads as well as its own syntax)
      {ToolCallFormat::Gemma4, "", "<|tool_call>call:get_weather" + args + "<tool_call|>"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(tool_call_format_name(c.f)) + ": " + c.text);
    auto g = tool_call_grammar(c.f, tools, "get_weather", /*parallel=*/false, c.tmpl);
    ASSERT_TRUE(g.ok()) << g.error();
    EXPECT_TRUE(grammar_accepts(*g, c.text)) << *g;
    EXPECT_FALSE(grammar_accepts(*g, c.text + c.text)) << "one call only";
    ToolCallParse p = parse_tool_calls(c.f, c.text, &tools);
    EXPECT_EQ(p.content, "");
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(p.calls[0].arguments), json::parse(args));
  }
}

TEST(ToolGrammar, TaggedTextArgumentsFollowTheSchema) {
  const json tools = J(R"([{"type":"function","function":{"name":"alarm","parameters":{"type":"object","properties":{
    "hour":{"type":"integer","minimum":0,"maximum":23},"label":{"type":"string","maxLength":5},
    "tone":{"enum":["beep","ring"]},"code":{"type":"string","pattern":"^[A-Z]{2}$"}},"required":["hour","tone"]}}}])");
  auto g = tool_call_grammar(ToolCallFormat::Qwen3Coder, tools, "", false, "");
  ASSERT_TRUE(g.ok()) << g.error();
  auto call = [](const std::string& params) {
    return "<tool_call>\n<function=alarm>\n" + params + "</function>\n</tool_call>";
  };
  auto param = [](const std::string& k, const std::string& v) { return "<parameter=" + k + ">\n" + v + "\n</parameter>\n"; };
  const std::string good = call(param("hour", "7") + param("label", "wake") + param("tone", "ring") + param("code", "AB"));
  EXPECT_TRUE(grammar_accepts(*g, good));
  EXPECT_TRUE(grammar_accepts(*g, call(param("hour", "23") + param("tone", "beep")))) << "optional ones may be left out";
  EXPECT_FALSE(grammar_accepts(*g, call(param("hour", "24") + param("tone", "beep")))) << "maximum";
  EXPECT_FALSE(grammar_accepts(*g, call(param("hour", "7")))) << "required tone";
  EXPECT_FALSE(grammar_accepts(*g, call(param("hour", "7") + param("label", "too long") + param("tone", "beep"))));
  EXPECT_FALSE(grammar_accepts(*g, call(param("hour", "7") + param("tone", "bell"))));
  EXPECT_FALSE(grammar_accepts(*g, call(param("hour", "7") + param("tone", "beep") + param("code", "abc"))));
  ToolCallParse p = parse_tool_calls(ToolCallFormat::Qwen3Coder, good, &tools);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(json::parse(p.calls[0].arguments), J(R"({"hour":7,"label":"wake","tone":"ring","code":"AB"})"));
}

TEST(ToolGrammar, PrefixRules) {
  EXPECT_EQ(prefix_gbnf_rules("root ::= a-b [a-z]{1,3} \"x y\" # c d\nx ::= \"\\\"q\" | root", "p-"),
            "p-root ::= p-a-b [a-z]{1,3} \"x y\" # c d\np-x ::= \"\\\"q\" | p-root");
}

TEST(ToolResponse, MessageToolCalls) {
  ToolPlan plan;
  plan.parse = true;
  std::vector<ChoiceOutput> choices(2);
  choices[0].text = "Sure.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>";
  choices[0].finish = FinishReason::Stop;
  choices[1].text = "Just text.";
  choices[1].finish = FinishReason::Stop;
  apply_tool_calls(plan, choices);
  json r = chat_response(make_meta(ApiKind::Chat, "m"), choices, Usage{}, *stories_tokenizer(), {});
  const json& c0 = r["choices"][0];
  EXPECT_EQ(c0["finish_reason"], "tool_calls");
  EXPECT_EQ(c0["message"]["content"], "Sure.");
  const json& tc = c0["message"]["tool_calls"][0];
  EXPECT_EQ(tc["type"], "function");
  EXPECT_EQ(tc["function"]["name"], "f");
  EXPECT_EQ(tc["function"]["arguments"], "{\"a\": 1}");
  EXPECT_EQ(tc["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(tc["id"].get<std::string>().size(), 29u);
  const json& c1 = r["choices"][1];
  EXPECT_EQ(c1["finish_reason"], "stop");
  EXPECT_EQ(c1["message"]["content"], "Just text.");
  EXPECT_FALSE(c1["message"].contains("tool_calls"));

  choices.assign(1, ChoiceOutput{});
  choices[0].text = "<tool_call>{\"name\": \"f\"}</tool_call>";
  choices[0].finish = FinishReason::Stop;
  apply_tool_calls(plan, choices);
  r = chat_response(make_meta(ApiKind::Chat, "m"), choices, Usage{}, *stories_tokenizer(), {});
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{}");
}

TEST(ToolResponse, StreamedDeltasAsOpenAI) {
  ToolPlan plan;
  plan.parse = true;
  ToolStreamer s(plan, 1);
  EXPECT_EQ(s.delta(0, "Hi <tool_", false), J(R"({"content":"Hi"})"));
  json d1 = s.delta(0, "call>{\"name\": \"f\", \"arguments\": {\"a\"", false);
  ASSERT_EQ(d1["tool_calls"].size(), 1u);
  const json& first = d1["tool_calls"][0];
  EXPECT_EQ(first["index"], 0);
  EXPECT_EQ(first["type"], "function");
  EXPECT_EQ(first["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(first["function"], J(R"({"name":"f","arguments":"{\"a\""})"));
  EXPECT_FALSE(d1.contains("content"));
  json d = s.delta(0, ": 1}}</tool_call><tool_call>{\"name\": \"g\"}</tool_call>", true);
  ASSERT_EQ(d["tool_calls"].size(), 2u);
  EXPECT_EQ(d["tool_calls"][0], J(R"({"index":0,"function":{"arguments":": 1}"}})"));
  EXPECT_EQ(d["tool_calls"][1]["index"], 1);
  EXPECT_EQ(d["tool_calls"][1]["function"]["name"], "g");
  EXPECT_EQ(d["tool_calls"][1]["function"]["arguments"], "{}");
  EXPECT_TRUE(s.called(0));
}
