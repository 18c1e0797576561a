// normalize_chat_messages (chat/messages.h): messages prepared for the template as vLLM prepares them,
// so templates that need tool-call arguments as objects (GLM-4.6, Qwen3-Coder, MiniMax-M2) or string
// content (Qwen3) render the OpenAI form of a conversation.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/messages.h"
#include "core/mmap.h"
#include "test_support.h"

namespace {

using nlohmann::ordered_json;

ordered_json normalize_ok(const char* msgs) {
  auto r = tmill::normalize_chat_messages(ordered_json::parse(msgs));
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? *r : ordered_json();
}

std::string normalize_error(const char* msgs) {
  auto r = tmill::normalize_chat_messages(ordered_json::parse(msgs));
  return r.ok() ? "no error" : r.error();
}

TEST(ChatMessages, AssistantToolCallsAndReasoningAsVllmPassesThem) {
  auto m = normalize_ok(R"([{"role":"user","content":"x"},
      {"role":"assistant","content":null,"tool_calls":[
        {"id":"a","type":"function","function":{"name":"f","arguments":"{\"city\": \"Paris\", \"n\": [1, 2]}"}},
        {"id":"b","type":"function","function":{"name":"g","arguments":""}},
        {"id":"c","type":"function","function":{"name":"h"}},
        {"id":"d","type":"function","function":{"name":"k","arguments":{"q":1}}}]},
      {"role":"tool","tool_call_id":"a","content":"18C"},
      {"role":"assistant","tool_calls":[],"reasoning":"hmm","content":"done"},
      {"role":"assistant","reasoning_content":"why"}])");
  EXPECT_EQ(m[1]["content"], "");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"city":"Paris","n":[1,2]})");
  EXPECT_EQ(m[1]["tool_calls"][0]["id"], "a");
  EXPECT_EQ(m[1]["tool_calls"][1]["function"]["arguments"].dump(), "{}");
  EXPECT_EQ(m[1]["tool_calls"][2]["function"]["arguments"].dump(), "{}");
  EXPECT_EQ(m[1]["tool_calls"][3]["function"]["arguments"].dump(), R"({"q":1})");
  EXPECT_EQ(m[2]["content"], "18C");
  EXPECT_FALSE(m[3].contains("tool_calls"));
  EXPECT_EQ(m[3]["reasoning_content"], "hmm");
  EXPECT_EQ(m[4]["reasoning"], "why");
  EXPECT_EQ(m[4]["content"], "");

  EXPECT_EQ(normalize_error(R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{oops"}}]}])"),
            "messages[0].tool_calls[0].function.arguments is not valid JSON");
  EXPECT_EQ(normalize_error(R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":5}}]}])"),
            "messages[0].tool_calls[0].function.arguments must be a JSON string or object");
  EXPECT_EQ(normalize_error(R"([{"role":"assistant","tool_calls":[{"id":"x"}]}])"),
            "messages[0].tool_calls[0] needs a 'function' object");
  EXPECT_EQ(normalize_error(R"([{"role":"assistant","tool_calls":{}}])"), "messages[0].tool_calls must be an array");
}

// Jinja2 refuses the raw OpenAI form on these templates (tool-goldens/ records its errors); prepared as
// vLLM prepares it, the conversation renders exactly like the object form, which goldens/ checks
// against Jinja2.
TEST(ChatMessages, StringArgumentsRenderLikeObjectsOnRealTemplates) {
  const char* as_string = R"([{"role":"user","content":"Weather in Paris?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"18C"}])";
  const char* as_object = R"([{"role":"user","content":"Weather in Paris?"},
      {"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},
      {"role":"tool","tool_call_id":"call_1","content":"18C"}])";
  ordered_json tools = ordered_json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"Get the weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])");
  for (const char* name : {"GLM-4.6.jinja", "Qwen3-Coder.jinja", "MiniMax-M2.jinja", "Qwen-Qwen3-0.6B.jinja",
                           "openai-gpt-oss-120b.jinja"}) {
    SCOPED_TRACE(name);
    auto src = tmill::read_file(tmill::test::source_path(std::string("tests/data/chat-templates/templates/") + name));
    ASSERT_TRUE(src.ok());
    auto tmpl = tmill::ChatTemplate::parse(*src);
    ASSERT_TRUE(tmpl.ok()) << tmpl.error();
    tmill::RenderOptions opts;
    opts.now = *tmill::parse_iso_time("2026-01-15T09:30:00");
    auto raw = tmill::apply_chat_template(*tmpl, ordered_json::parse(as_string), true, "<s>", "</s>", &tools, nullptr, opts);
    EXPECT_FALSE(raw.ok());  // as under Jinja2
    auto want = tmill::apply_chat_template(*tmpl, ordered_json::parse(as_object), true, "<s>", "</s>", &tools, nullptr, opts);
    ASSERT_TRUE(want.ok()) << want.error();
    auto got = tmill::apply_chat_template(*tmpl, normalize_ok(as_string), true, "<s>", "</s>", &tools, nullptr, opts);
    ASSERT_TRUE(got.ok()) << got.error();
    EXPECT_EQ(*got, *want);
    EXPECT_NE(got->find("Paris"), std::string::npos);
  }
}

}  // namespace
