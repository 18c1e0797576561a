// gpt-oss's harmony format through its shipped template (tests/data/chat-templates, the one gpt-oss
// GGUF files carry as tokenizer.chat_template): an OpenAI-form conversation (tool-call arguments as a
// JSON string, content null) prepared by normalize_chat_messages renders exactly as Jinja2 renders
// the golden's object form; an assistant's reasoning_content reaches the template's `thinking` (the
// analysis channel) as llama.cpp's gpt-oss handler passes it, kept before a tool call and dropped once
// a final answer follows; and the harmony output is read back into reasoning, content and calls.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/messages.h"
#include "chat/tool_calls.h"
#include "core/mmap.h"
#include "test_support.h"

namespace {

using nlohmann::ordered_json;

struct Harmony {
  tmill::ChatTemplate tmpl;
  ordered_json golden;
};

Harmony load() {
  const std::string dir = tmill::test::source_path("tests/data/chat-templates");
  auto src = tmill::read_file(dir + "/templates/openai-gpt-oss-120b.jinja");
  EXPECT_TRUE(src.ok());
  auto tmpl = tmill::ChatTemplate::parse(*src);
  EXPECT_TRUE(tmpl.ok()) << tmpl.error();
  auto golden = tmill::read_file(dir + "/goldens/openai-gpt-oss-120b.json");
  EXPECT_TRUE(golden.ok());
  return {std::move(*tmpl), ordered_json::parse(*golden)};
}

std::string render(const Harmony& h, const ordered_json& messages, const ordered_json* tools) {
  auto norm = tmill::normalize_chat_messages(messages);
  EXPECT_TRUE(norm.ok()) << norm.error();
  tmill::RenderOptions opts;
  opts.now = *tmill::parse_iso_time(h.golden["fixed_now"].get<std::string>());
  auto out = tmill::apply_chat_template(h.tmpl, *norm, true, "<BOS>", "<EOS>", tools, nullptr, opts);
  EXPECT_TRUE(out.ok()) << out.error();
  return out.ok() ? *out : "";
}

// The golden's tool conversation, as an OpenAI client sends it.
ordered_json openai_form(const char* reasoning) {
  ordered_json m = ordered_json::parse(R"([
    {"role":"user","content":"What's the weather in Hangzhou?"},
    {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
      "function":{"name":"get_weather","arguments":"{\"city\": \"Hangzhou\", \"unit\": \"celsius\"}"}}]},
    {"role":"tool","tool_call_id":"call_1","name":"get_weather","content":"{\"temp\": 21, \"sky\": \"cloudy\"}"},
    {"role":"user","content":"Thanks! And tomorrow?"}])");
  if (reasoning) m[1]["reasoning_content"] = reasoning;
  return m;
}

}  // namespace

TEST(Harmony, OpenAiFormRendersAsTheGolden) {
  const Harmony h = load();
  const ordered_json& c = h.golden["cases"][3];
  ASSERT_EQ(c["name"], "tools_call_and_result");
  const std::string want = c["expected"].get<std::string>();
  EXPECT_EQ(render(h, openai_form(nullptr), &c["context"]["tools"]), want);
  // every golden conversation without tools renders through the messages path as Jinja2 rendered it
  for (int i = 0; i < 2; ++i) EXPECT_EQ(render(h, h.golden["cases"][i]["context"]["messages"], nullptr),
                                        h.golden["cases"][i]["expected"].get<std::string>()) << i;
}

TEST(Harmony, ReasoningBecomesTheAnalysisChannel) {
  const Harmony h = load();
  const ordered_json& tools = h.golden["cases"][3]["context"]["tools"];
  std::string want = h.golden["cases"][3]["expected"].get<std::string>();
  const std::string call = "<|start|>assistant to=functions.get_weather";
  const size_t at = want.find(call);
  ASSERT_NE(at, std::string::npos);
  want.insert(at, "<|start|>assistant<|channel|>analysis<|message|>Look up Hangzhou.<|end|>");
  EXPECT_EQ(render(h, openai_form("Look up Hangzhou."), &tools), want);
  // once a final answer follows the call, the call's analysis is dropped (and earlier turns' too)
  ordered_json later = openai_form("Look up Hangzhou.");
  later.insert(later.begin() + 3, ordered_json::parse(
      R"({"role":"assistant","content":"21 and cloudy.","reasoning_content":"Report it."})"));
  const std::string out = render(h, later, &tools);
  EXPECT_EQ(out.find("<|channel|>analysis"), std::string::npos) << out;
  EXPECT_NE(out.find("<|start|>assistant<|channel|>final<|message|>21 and cloudy.<|end|>"), std::string::npos) << out;
}

// What gpt-oss writes back: analysis (reasoning, not content), a call on the commentary channel, or a
// final answer.
TEST(Harmony, OutputReadBack) {
  const Harmony h = load();
  const tmill::ToolCallFormat fmt = tmill::detect_tool_call_format(h.tmpl.source());
  ASSERT_EQ(fmt, tmill::ToolCallFormat::OpenAI);
  auto parsed = tmill::parse_tool_calls(
      fmt, "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
           "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(parsed.content, "");
  auto answer = tmill::parse_tool_calls(
      fmt, "<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Hello!");
  EXPECT_TRUE(answer.calls.empty());
  EXPECT_EQ(answer.content, "Hello!");
}
