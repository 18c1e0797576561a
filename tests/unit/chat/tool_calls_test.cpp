// Tool-call parsers (chat/tool_calls.h): what each real template (tests/data/chat-templates) renders for
// an assistant tool call parses back to the same call; streaming at every split point adds up to the
// same content and calls; malformed calls stay content.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "core/mmap.h"
#include "test_support.h"

using namespace tmill;
using ojson = nlohmann::ordered_json;

namespace {

const ojson& weather_tools() {
  static const ojson t = ojson::parse(R"([{"type":"function","function":{"name":"get_weather",
    "description":"Get the current weather in a city","parameters":{"type":"object","properties":{
    "city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},
    "days":{"type":"integer"}},"required":["city"]}}}])");
  return t;
}

// Streams `text` split at `cuts` and returns the reassembled result (content + calls).
ToolCallParse stream_parse(ToolCallFormat f, const std::string& text, const std::vector<size_t>& cuts,
                           const ojson* tools) {
  ToolCallStream s(f, tools);
  ToolCallParse r;
  auto apply = [&](const ToolStreamDelta& d) {
    r.content += d.content;
    for (const ToolCallDelta& c : d.calls) {
      if (c.first) {
        EXPECT_EQ(c.index, static_cast<int32_t>(r.calls.size())) << "calls start in order";
        r.calls.push_back({c.id, c.name, ""});
      }
      EXPECT_LT(c.index, static_cast<int32_t>(r.calls.size())) << "a delta for a call not started";
      if (c.index < static_cast<int32_t>(r.calls.size())) r.calls[static_cast<size_t>(c.index)].arguments += c.arguments;
    }
  };
  size_t prev = 0;
  for (size_t cut : cuts) {
    apply(s.feed(std::string_view(text).substr(prev, cut - prev)));
    prev = cut;
  }
  apply(s.feed(std::string_view(text).substr(prev)));
  apply(s.finish());
  return r;
}

void expect_same(const ToolCallParse& got, const ToolCallParse& want, const std::string& what) {
  EXPECT_EQ(got.content, want.content) << what;
  ASSERT_EQ(got.calls.size(), want.calls.size()) << what;
  for (size_t i = 0; i < got.calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].name, want.calls[i].name) << what;
    EXPECT_EQ(got.calls[i].id, want.calls[i].id) << what;
    EXPECT_EQ(got.calls[i].arguments, want.calls[i].arguments) << what;
  }
}

// Streaming at every single split point, at every pair of split points (short texts), and one byte
// at a time all give what the finished-text parse gives.
void expect_streaming_matches(ToolCallFormat f, const std::string& text, const ojson* tools = nullptr) {
  const ToolCallParse want = parse_tool_calls(f, text, tools);
  for (size_t i = 0; i <= text.size(); ++i)
    expect_same(stream_parse(f, text, {i}, tools), want, "split at " + std::to_string(i) + " of: " + text);
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  expect_same(stream_parse(f, text, every, tools), want, "byte by byte: " + text);
  if (text.size() <= 120)
    for (size_t i = 1; i < text.size(); ++i)
      for (size_t j = i + 1; j < text.size(); ++j) {
        if (::testing::Test::HasFailure()) return;
        expect_same(stream_parse(f, text, {i, j}, tools), want, "splits " + std::to_string(i) + "," + std::to_string(j));
      }
}

ToolCallParse parse(ToolCallFormat f, const std::string& text, const ojson* tools = &weather_tools()) {
  expect_streaming_matches(f, text, tools);
  return parse_tool_calls(f, text, tools);
}

void expect_call(const ToolCall& c, const std::string& name, const char* args_json) {
  EXPECT_EQ(c.name, name);
  ojson got;
  ASSERT_NO_THROW(got = ojson::parse(c.arguments)) << c.arguments;
  EXPECT_EQ(got, ojson::parse(args_json)) << c.arguments;
}

std::string read_text(const std::string& rel) {
  auto t = read_file(test::source_path(rel));
  EXPECT_TRUE(t.ok()) << t.error();
  return t.ok() ? *t : std::string();
}

// --- the real templates, rendering an assistant tool call ---

struct TemplateCase {
  const char* file;
  ToolCallFormat format;
  const char* end;            // where the assistant's output ends in the rendered text ("" : at the end)
  bool string_arguments;      // the template wants arguments as a JSON string
  const char* id;             // the id the format carries back ("" when none)
};

const TemplateCase kTemplates[] = {
    {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::Hermes, "<|im_end|>", false, ""},
    {"Qwen-Qwen3-0.6B.jinja", ToolCallFormat::Hermes, "<|im_end|>", false, ""},
    {"Qwen-QwQ-32B.jinja", ToolCallFormat::Hermes, "<|im_end|>", false, ""},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolCallFormat::Hermes, "<|im_end|>", false, ""},
    {"Qwen3-Coder.jinja", ToolCallFormat::Qwen3Coder, "<|im_end|>", false, ""},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::Llama3Json, "<|eot_id|>", false, ""},
    {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolCallFormat::Llama3Json, "<|eot_id|>", false, ""},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallFormat::Mistral, "</s>", false, ""},
    {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolCallFormat::Mistral, "</s>", false, "abcDEF123"},
    {"unsloth-mistral-Devstral-Small-2507.jinja", ToolCallFormat::Mistral, "</s>", false, ""},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolCallFormat::DeepSeekV3, "<｜end▁of▁sentence｜>", false, ""},
    {"deepseek-ai-DeepSeek-V3.1.jinja", ToolCallFormat::DeepSeekV31, "<｜end▁of▁sentence｜>", false, ""},
    {"GLM-4.6.jinja", ToolCallFormat::Glm45, "<|", false, ""},
    {"moonshotai-Kimi-K2.jinja", ToolCallFormat::KimiK2, "<|im_end|>", false, "functions.get_weather:0"},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", ToolCallFormat::CommandR, "<|END_OF_TURN_TOKEN|>", false, ""},
    {"meetkai-functionary-medium-v3.2.jinja", ToolCallFormat::Functionary, "<|eot_id|>", true, ""},
    {"MiniMax-M2.jinja", ToolCallFormat::MinimaxM2, "[e~[", false, ""},
    {"openai-gpt-oss-120b.jinja", ToolCallFormat::OpenAI, "<|call|>", false, ""},
    {"google-gemma-4-31B-it.jinja", ToolCallFormat::Gemma4, "<|tool_response>", false, ""},  // (an end-of-generation token)
};

// Renders [user, assistant with `calls`] and returns the assistant's output as the model writes it.
std::string rendered_output(const TemplateCase& tc, const ChatTemplate& tmpl, const ojson& calls) {
  ojson user = {{"role", "user"}, {"content", "What's the weather in Hangzhou?"}};
  ojson assistant = {{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}};
  ojson ctx = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"tools", weather_tools()}};
  ctx["messages"] = ojson::array({user});
  ctx["add_generation_prompt"] = true;
  auto prompt = tmpl.render(ctx);
  EXPECT_TRUE(prompt.ok()) << prompt.error();
  ctx["messages"] = ojson::array({user, assistant});
  ctx["add_generation_prompt"] = false;
  auto full = tmpl.render(ctx);
  EXPECT_TRUE(full.ok()) << full.error();
  if (!prompt.ok() || !full.ok()) return {};
  size_t common = 0;
  while (common < prompt->size() && common < full->size() && (*prompt)[common] == (*full)[common]) ++common;
  if (common < prompt->size())
    while (common > 0 && (*full)[common - 1] != '\n' && (*full)[common - 1] != '>') --common;
  std::string out = full->substr(common);
  if (size_t e = out.find(tc.end, 1); tc.end[0] && e != std::string::npos) out.resize(e);
  if (size_t t = out.find("</think>"); t != std::string::npos) out = out.substr(t + 8);
  if (size_t t = out.find("<|END_THINKING|>"); t != std::string::npos) out = out.substr(t + 16);
  return out;
}

TEST(ToolCallTemplates, TwoCallsParseBack) {
  // Templates that render several calls in one message (Llama 3.x allows one; gpt-oss ends at the first).
  for (const TemplateCase& tc : kTemplates) {
    if (tc.format == ToolCallFormat::Llama3Json || tc.format == ToolCallFormat::OpenAI) continue;
    SCOPED_TRACE(tc.file);
    auto tmpl = ChatTemplate::parse(read_text(std::string("tests/data/chat-templates/templates/") + tc.file));
    ASSERT_TRUE(tmpl.ok()) << tmpl.error();
    ojson calls = ojson::array();
    const char* ids[] = {"abcDEF123", "xyzXYZ789"};
    const ojson args[] = {{{"city", "Hangzhou"}}, {{"city", "Paris"}, {"days", 2}}};
    for (int i = 0; i < 2; ++i)
      calls.push_back({{"id", tc.format == ToolCallFormat::KimiK2 ? "functions.get_weather:" + std::to_string(i) : ids[i]},
                       {"type", "function"},
                       {"function", {{"name", "get_weather"},
                                     {"arguments", tc.string_arguments ? ojson(args[i].dump()) : args[i]}}}});
    const std::string out = rendered_output(tc, *tmpl, calls);
    SCOPED_TRACE("output: " + out);
    const ojson tools = weather_tools();
    ToolCallParse p = parse(tc.format, out, &tools);
    EXPECT_EQ(p.content, "");
    ASSERT_EQ(p.calls.size(), 2u);
    expect_call(p.calls[0], "get_weather", R"({"city":"Hangzhou"})");
    expect_call(p.calls[1], "get_weather", R"({"city":"Paris","days":2})");
  }
}

TEST(ToolCallTemplates, RenderedCallsParseBack) {
  for (const TemplateCase& tc : kTemplates) {
    SCOPED_TRACE(tc.file);
    const std::string src = read_text(std::string("tests/data/chat-templates/templates/") + tc.file);
    EXPECT_EQ(detect_tool_call_format(src), tc.format) << "detected " << tool_call_format_name(detect_tool_call_format(src));
    auto tmpl = ChatTemplate::parse(src);
    ASSERT_TRUE(tmpl.ok()) << tmpl.error();
    ojson args = {{"city", "Hangzhou"}, {"unit", "celsius"}};
    ojson call = {{"id", tc.id[0] ? tc.id : "abcDEF123"},
                  {"type", "function"},
                  {"function", {{"name", "get_weather"}, {"arguments", tc.string_arguments ? ojson(args.dump()) : args}}}};
    // The assistant's output: what the conversation adds to the prompt, up to the end of its turn; a
    // reasoning block the template writes first (Qwen3, GLM) is the reasoning parser's, not ours.
    const std::string out = rendered_output(tc, *tmpl, ojson::array({call}));
    SCOPED_TRACE("output: " + out);
    const ojson tools = weather_tools();
    ToolCallParse p = parse(tc.format, out, &tools);
    EXPECT_EQ(p.content, "");
    ASSERT_EQ(p.calls.size(), 1u);
    expect_call(p.calls[0], "get_weather", R"({"city":"Hangzhou","unit":"celsius"})");
    EXPECT_EQ(p.calls[0].id, tc.id);
  }
}

TEST(ToolCallTemplates, FireFunctionV2) {
  // Its template needs a `functions` variable HF does not pass; the call text from its system prompt.
  const std::string src = read_text("tests/data/chat-templates/templates/fireworks-ai-llama-3-firefunction-v2.jinja");
  EXPECT_EQ(detect_tool_call_format(src), ToolCallFormat::FireFunction);
  ToolCallParse p = parse(ToolCallFormat::FireFunction,
                          " functools[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Hangzhou\"}}]");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_weather", R"({"city":"Hangzhou"})");
}

TEST(ToolCallTemplates, DetectionFallsBackToHermes) {
  EXPECT_EQ(detect_tool_call_format(fallback_chat_template()), ToolCallFormat::Hermes);
  EXPECT_EQ(detect_tool_call_format(""), ToolCallFormat::Hermes);
  const std::string granite = read_text("tests/data/chat-templates/templates/ibm-granite-granite-3.3-2B-Instruct.jinja");
  EXPECT_EQ(detect_tool_call_format(granite), ToolCallFormat::Granite);
}

TEST(ToolCallNames, RoundTripAndAliases) {
  for (const char* n : {"hermes", "qwen3_coder", "llama3_json", "mistral", "deepseek_v3", "deepseek_v31", "glm45",
                        "kimi_k2", "granite", "command_r", "functionary", "firefunction_v2", "minimax_m2", "openai",
                        "gemma4"}) {
    auto f = tool_call_format_from_name(n);
    ASSERT_TRUE(f.has_value()) << n;
    EXPECT_EQ(tool_call_format_name(*f), n);
    EXPECT_NE(tool_call_format_names().find(n), std::string::npos);
  }
  EXPECT_FALSE(tool_call_format_from_name("pythonic").has_value());
  EXPECT_EQ(tool_call_format_from_name("qwen"), ToolCallFormat::Hermes);
}

// --- per format ---

TEST(ToolCallHermes, ContentAndSeveralCalls) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"arguments\": {\"city\": \"Oslo\", \"days\": 2}, \"name\": \"get_weather\"}\n</tool_call>";
  ToolCallParse p = parse(ToolCallFormat::Hermes, text);
  EXPECT_EQ(p.content, "Let me check.");
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[0], "get_weather", R"({"city":"Paris"})");
  expect_call(p.calls[1], "get_weather", R"({"city":"Oslo","days":2})");
  EXPECT_EQ(p.calls[0].arguments, R"({"city": "Paris"})") << "arguments are the model's JSON text";
}

TEST(ToolCallHermes, UnclosedAtTheEndAndStringArguments) {
  ToolCallParse p = parse(ToolCallFormat::Hermes, "<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{\"a\":1}");
  p = parse(ToolCallFormat::Hermes, "<tool_call>{\"name\":\"f\"}</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{}");
}

TEST(ToolCallHermes, MalformedCallsStayContent) {
  for (const char* bad : {"<tool_call>not json</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
                          "<tool_call>{\"name\": 3}</tool_call>",
                          "text <tool_call", "<tool_call>[1, 2]</tool_call>"}) {
    SCOPED_TRACE(bad);
    ToolCallParse p = parse(ToolCallFormat::Hermes, bad);
    EXPECT_TRUE(p.calls.empty());
    EXPECT_EQ(p.content, bad);
  }
  // Arguments that are not an object (found after the name was streamed): content when finished.
  const std::string not_object = "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>";
  EXPECT_TRUE(parse_tool_calls(ToolCallFormat::Hermes, not_object).calls.empty());
  EXPECT_EQ(parse_tool_calls(ToolCallFormat::Hermes, not_object).content, not_object);
  // A good call after a bad one still parses.
  ToolCallParse p = parse(ToolCallFormat::Hermes, "<tool_call>oops</tool_call><tool_call>{\"name\":\"g\"}</tool_call>");
  EXPECT_EQ(p.content, "<tool_call>oops</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "g");
}

TEST(ToolCallHermes, CallCutOffMidArguments) {
  // Non-streaming: the text as written. Streaming has already sent the name and the arguments so far
  // (a response cut by max_tokens), and adds no content for it.
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1";
  ToolCallParse p = parse_tool_calls(ToolCallFormat::Hermes, text);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, text);
  ToolCallParse s = stream_parse(ToolCallFormat::Hermes, text, {20, 40}, nullptr);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "f");
  EXPECT_EQ(s.calls[0].arguments, "{\"a\": [1");
}

TEST(ToolCallHermes, UnclosedObjectWithCompleteArgumentsIsACall) {
  ToolCallParse p = parse(ToolCallFormat::Hermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{\"a\": 1}");
}

TEST(ToolCallHermes, PlainTextPassesThrough) {
  ToolCallParse p = parse(ToolCallFormat::Hermes, "Once upon a time, <b>a</b> tool_call < 3.\n");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "Once upon a time, <b>a</b> tool_call < 3.\n");
}

TEST(ToolCallHermes, StreamingHoldsBackAPartialMarkerAndStartsCallsEarly) {
  ToolCallStream s(ToolCallFormat::Hermes);
  EXPECT_EQ(s.feed("Hi <tool").content, "Hi");
  EXPECT_TRUE(s.feed("_call>{\"na").empty());
  ToolStreamDelta d = s.feed("me\": \"f\", \"arguments\": {\"a\"");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_TRUE(d.calls[0].first);
  EXPECT_EQ(d.calls[0].name, "f");
  EXPECT_EQ(d.calls[0].arguments, "{\"a\"");
  d = s.feed(": 1}}</tool_call>");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_FALSE(d.calls[0].first);
  EXPECT_EQ(d.calls[0].arguments, ": 1}");
  EXPECT_TRUE(s.finish().empty());
  EXPECT_EQ(s.calls_started(), 1);
}

TEST(ToolCallQwen3Coder, TypedValuesFromTheSchema) {
  const std::string text =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n"
      "</parameter>\n</function>\n</tool_call>";
  ToolCallParse p = parse(ToolCallFormat::Qwen3Coder, text);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city": "New York", "days": 3})");
  // Without a schema a value that parses as JSON is JSON.
  p = parse_tool_calls(ToolCallFormat::Qwen3Coder, "<tool_call><function=f><parameter=n>7</parameter></function></tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"n": 7})");
  // Malformed once the name was known: the finished text keeps it as content.
  p = parse_tool_calls(ToolCallFormat::Qwen3Coder, "<tool_call><function=get_weather>oops</function></tool_call>");
  EXPECT_TRUE(p.calls.empty());
}

TEST(ToolCallLlama3, JsonCallsPythonTagAndText) {
  ToolCallParse p = parse(ToolCallFormat::Llama3Json,
                          "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}; "
                          "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Bern\"}}");
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[1], "get_weather", R"({"city":"Bern"})");
  EXPECT_EQ(p.content, "");
  p = parse(ToolCallFormat::Llama3Json, "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}");
  ASSERT_EQ(p.calls.size(), 1u);
  p = parse(ToolCallFormat::Llama3Json, "<|python_tag|>brave_search.call(query=\"weather, today\", n=3)");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "brave_search", R"({"query":"weather, today","n":3})");
  EXPECT_TRUE(parse_tool_calls(ToolCallFormat::Llama3Json, "{\"name\": \"f\", \"parameters\": {").calls.empty());
  for (const char* text : {"The answer is {\"name\": 1}.", "{\"answer\": 42}", "Plain words."}) {
    SCOPED_TRACE(text);
    p = parse(ToolCallFormat::Llama3Json, text);
    EXPECT_TRUE(p.calls.empty());
    EXPECT_EQ(p.content, text);
  }
}

TEST(ToolCallMistral, ArrayAndArgsForms) {
  ToolCallParse p = parse(ToolCallFormat::Mistral,
                          "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"123456789\"}, "
                          "{\"name\": \"b\", \"arguments\": {}}]");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].id, "");
  EXPECT_EQ(p.calls[1].name, "b");
  p = parse(ToolCallFormat::Mistral, "Sure.[TOOL_CALLS]a[ARGS]{\"x\": 1}[TOOL_CALLS]b[CALL_ID]abcdefghi[ARGS]{}");
  EXPECT_EQ(p.content, "Sure.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].id, "abcdefghi");
  expect_call(p.calls[0], "a", R"({"x":1})");
  p = parse(ToolCallFormat::Mistral, "[TOOL_CALLS]not a call");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "[TOOL_CALLS]not a call");
}

TEST(ToolCallDeepSeek, BothLayoutsAndSeveralCalls) {
  ToolCallParse p = parse(ToolCallFormat::DeepSeekV31,
                          "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a<｜tool▁sep｜>{\"x\": 1}<｜tool▁call▁end｜>"
                          "<｜tool▁call▁begin｜>b<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].name, "b");
  p = parse(ToolCallFormat::DeepSeekV3,
            "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>a\n```json\n{\"x\": 1}\n```"
            "<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_EQ(p.content, "Checking.");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "a", R"({"x":1})");
  p = parse(ToolCallFormat::DeepSeekV3, "<｜tool▁calls▁begin｜>junk<｜tool▁calls▁end｜>");
  EXPECT_TRUE(p.calls.empty());
}

TEST(ToolCallGlm, ArgKeysAndValues) {
  ToolCallParse p = parse(ToolCallFormat::Glm45,
                          "I'll look.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Lima</arg_value>\n"
                          "<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>");
  EXPECT_EQ(p.content, "I'll look.");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city": "Lima", "days": 2})");
}

// Gemma 4: its value syntax (strings between <|"|>, bare keys, nested objects and arrays, numbers,
// booleans, null and Python's None), JSON's quoting too, one call per block; a block that does not read
// stays content.
TEST(ToolCallGemma4, ValueSyntaxToJson) {
  ToolCallParse p = parse(ToolCallFormat::Gemma4,
                          "Checking.<|tool_call>call:get_weather{city:<|\"|>S\u00e3o \"Paulo\"<|\"|>,days:3,opts:{deep:true,"
                          "tags:[<|\"|>a<|\"|>,-1.5e2,null,None]}}<tool_call|><|tool_call>call:get_time{}<tool_call|>");
  EXPECT_EQ(p.content, "Checking.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(ojson::parse(p.calls[0].arguments),
            ojson::parse(R"({"city":"S\u00e3o \"Paulo\"","days":3,"opts":{"deep":true,"tags":["a",-150.0,null,null]}})"));
  expect_call(p.calls[1], "get_time", "{}");
  // quoted keys (as the template writes nested declarations) and JSON's own quoting
  p = parse(ToolCallFormat::Gemma4, "<|tool_call>call:f{<|\"|>k<|\"|>:1, \"q\": \"x,y\"}<tool_call|>");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "f", R"({"k":1,"q":"x,y"})");
  // not a call: kept as written (finished texts: a stream has announced a call by its name before its
  // block turned out broken, as with every format)
  for (const char* bad : {"<|tool_call>call:f{k:<tool_call|>", "<|tool_call>f{k:1}<tool_call|>",
                          "<|tool_call>call:f{k:1} trailing<tool_call|>", "<|tool_call>call:f{k:tru}<tool_call|>"}) {
    p = parse_tool_calls(ToolCallFormat::Gemma4, bad);
    EXPECT_TRUE(p.calls.empty()) << bad;
    EXPECT_EQ(p.content, bad);
  }
  // nesting past 64 levels is refused, not recursed into
  std::string deep = "<|tool_call>call:f{k:";
  for (int i = 0; i < 200; ++i) deep += "[";
  for (int i = 0; i < 200; ++i) deep += "]";
  deep += "}<tool_call|>";
  EXPECT_TRUE(parse_tool_calls(ToolCallFormat::Gemma4, deep).calls.empty());
}

TEST(ToolCallHarmony, CallsFinalTextAndAnalysis) {
  ToolCallParse p = parse(ToolCallFormat::OpenAI,
                          "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
                          "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Kyiv\"}<|call|>");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "get_weather", R"({"city":"Kyiv"})");
  p = parse(ToolCallFormat::OpenAI, "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>final"
                                    "<|message|>It is sunny.");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "It is sunny.");
}

TEST(ToolCallFunctionary, RecipientsAndContent) {
  ToolCallParse p = parse(ToolCallFormat::Functionary,
                          "all\nLet me check.>>>get_weather\n{\"city\": \"Quito\"}>>>get_weather\n{\"city\": \"Baku\"}");
  EXPECT_EQ(p.content, "Let me check.");
  ASSERT_EQ(p.calls.size(), 2u);
  expect_call(p.calls[1], "get_weather", R"({"city":"Baku"})");
  p = parse(ToolCallFormat::Functionary, "all\nHello there");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "Hello there");
}

TEST(ToolCallOthers, GraniteKimiMinimaxCommandR) {
  ToolCallParse p = parse(ToolCallFormat::Granite, "<|tool_call|>[{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}]");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "f", R"({"a":[1,2]})");
  p = parse(ToolCallFormat::KimiK2,
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|>"
            "<|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>{\"b\":2}<|tool_call_end|>"
            "<|tool_calls_section_end|>");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].id, "functions.g:1");
  EXPECT_EQ(p.calls[1].name, "g");
  p = parse(ToolCallFormat::MinimaxM2,
            "<minimax:tool_call>\n<invoke name=\"f\">\n<parameter name=\"q\">hi there</parameter>\n</invoke>\n"
            "<invoke name=\"g\">\n</invoke>\n</minimax:tool_call>");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].arguments, R"({"q": "hi there"})");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  p = parse(ToolCallFormat::CommandR,
            "Action: ```json\n[{\"tool_name\": \"f\", \"parameters\": {\"a\": 1}}]\n```");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_call(p.calls[0], "f", R"({"a":1})");
}

}  // namespace

namespace {

// Random texts stitched from the formats' own markers and JSON pieces: every parser, whole and
// streamed in random pieces, must not crash, and every call it returns has a JSON object as arguments.
TEST(ToolCallRobustness, RandomMarkerSoup) {
  const char* pieces[] = {"<tool_call>", "</tool_call>", "{", "}", "[", "]", "\"name\"", "\"arguments\"", ":", ",",
                          "\"f\"", "\"x\\\"y\"", " ", "\n", "1", "-2.5e3", "true", "null", "<function=", "<parameter=",
                          "</parameter>", "</function>", ">", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
                          "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "<|python_tag|>", ".call(", "q=\"v\"", ")", ";",
                          "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
                          "<｜tool▁calls▁end｜>", "```json", "```", "<|tool_calls_section_begin|>", "<|tool_call_begin|>",
                          "functions.f:0", "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|tool_call|>",
                          "<|START_ACTION|>", "<|END_ACTION|>", "\"tool_name\"", "\"parameters\"", ">>>", "all",
                          "functools", "<minimax:tool_call>", "<invoke name=\"f\">", "</invoke>", "<|channel|>",
                          "<|message|>", "<|end|>", "<|start|>", "to=functions.f", "analysis", "final", "é", "\xff",
                          "<|tool_call>", "<tool_call|>", "call:f", "<|\"|>", "k:", "None"};
  const ojson tools = weather_tools();
  uint64_t state = 12345;
  auto rnd = [&](uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  const ToolCallFormat formats[] = {
      ToolCallFormat::Hermes,      ToolCallFormat::Qwen3Coder, ToolCallFormat::Llama3Json, ToolCallFormat::Mistral,
      ToolCallFormat::DeepSeekV3,  ToolCallFormat::DeepSeekV31, ToolCallFormat::Glm45,     ToolCallFormat::KimiK2,
      ToolCallFormat::Granite,     ToolCallFormat::CommandR,   ToolCallFormat::Functionary, ToolCallFormat::FireFunction,
      ToolCallFormat::MinimaxM2,   ToolCallFormat::OpenAI,     ToolCallFormat::Gemma4};
  int calls = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string text;
    const size_t n = 1 + rnd(30);
    for (size_t i = 0; i < n; ++i) text += pieces[rnd(sizeof(pieces) / sizeof(pieces[0]))];
    for (ToolCallFormat f : formats) {
      ToolCallParse p = parse_tool_calls(f, text, &tools);
      for (const ToolCall& c : p.calls) {
        ++calls;
        EXPECT_FALSE(c.name.empty()) << text;
        EXPECT_TRUE(ojson::accept(c.arguments) && ojson::parse(c.arguments).is_object())
            << tool_call_format_name(f) << ": " << c.arguments << " from " << text;
      }
      std::vector<size_t> cuts;
      for (size_t i = 1; i < text.size(); i += 1 + rnd(6)) cuts.push_back(i);
      ToolCallParse s = stream_parse(f, text, cuts, &tools);
      EXPECT_LE(s.calls.size(), text.size());
    }
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(calls, 0) << "the soup should contain some calls";
}

}  // namespace
