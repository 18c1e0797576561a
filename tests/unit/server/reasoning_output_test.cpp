// Reasoning output on /v1/chat/completions (server/reasoning_output.h): which requests get a split and
// where their output starts, chat_template_kwargs / reasoning_effort reaching real templates, the
// constraint moved after the reasoning, and the message / delta fields (reasoning_content) as vLLM
// returns them.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "core/mmap.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/reasoning_output.h"
#include "server_test_data.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;
using namespace tmill::server;

namespace {

using test::stories_tokenizer;

std::shared_ptr<const ChatTemplate> tmpl(const std::string& src) {
  auto t = ChatTemplate::parse(src);
  EXPECT_TRUE(t.ok()) << t.error();
  return std::make_shared<const ChatTemplate>(std::move(t).value());
}

std::shared_ptr<const ChatTemplate> real_template(const std::string& name) {
  auto src = read_file(test::source_path("tests/data/chat-templates/templates/" + name));
  EXPECT_TRUE(src.ok());
  return tmpl(*src);
}

// A reasoning model's template in miniature: the generation prompt opens the reasoning block unless
// enable_thinking is false, which closes it (as Qwen3 and DeepSeek-V3.1 do).
const char* kThinkTemplate =
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: <think>\n{% if enable_thinking is false %}</think>\n{% endif %}"
    "{% endif %}";

ServerContext context(const char* src = kThinkTemplate, const char* parser = "auto") {
  ServerContext c;
  c.served_model_name = "stories";
  c.tokenizer = stories_tokenizer();
  c.chat_template = tmpl(src);
  c.max_model_len = 1024;
  c.n_vocab = c.tokenizer->n_vocab();
  c.reasoning = *reasoning_config(parser);
  return c;
}

json J(const char* s) { return json::parse(s); }

MappedRequest chat_ok(const json& body, const ServerContext& c) {
  ApiError err;
  auto r = map_chat_request(body, c, &err);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? std::move(r).value() : MappedRequest{};
}

TEST(ReasoningOutput, ParserFlag) {
  EXPECT_TRUE(reasoning_config("auto")->auto_detect);
  EXPECT_FALSE(reasoning_config("none")->auto_detect);
  EXPECT_FALSE(reasoning_config("none")->spec.has_value());
  EXPECT_EQ(reasoning_config("deepseek_r1")->spec->name, "deepseek_r1");
  auto bad = reasoning_config("deepseek");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("unknown reasoning parser 'deepseek'"), std::string::npos);
}

TEST(ReasoningOutput, WhichRequestsSplitAndWhereTheyStart) {
  const json body = J(R"({"messages":[{"role":"user","content":"Hi"}]})");
  // auto + a template that writes <think>: split, starting inside the reasoning the prompt opened.
  MappedRequest m = chat_ok(body, context());
  ASSERT_TRUE(m.reasoning.has_value());
  EXPECT_EQ(m.reasoning->start, ReasoningStart::InReasoning);
  EXPECT_EQ(m.reasoning->spec.end, "</think>");
  // enable_thinking=false closes the block in the prompt: no reasoning in the output.
  m = chat_ok(J(R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":false}})"),
              context());
  ASSERT_TRUE(m.reasoning.has_value());
  EXPECT_EQ(m.reasoning->start, ReasoningStart::None);
  EXPECT_EQ(m.prompts[0].text, "user: Hi\nassistant: <think>\n</think>\n");
  // reasoning_effort "none" turns thinking off the way vLLM does (enable_thinking = false)...
  m = chat_ok(J(R"({"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"none"})"), context());
  EXPECT_EQ(m.reasoning->start, ReasoningStart::None);
  // ...unless chat_template_kwargs says otherwise.
  m = chat_ok(J(R"({"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"none",
                    "chat_template_kwargs":{"enable_thinking":true}})"),
              context());
  EXPECT_EQ(m.reasoning->start, ReasoningStart::InReasoning);
  // --reasoning-parser none: never; a template without <think>: not detected, unless a parser is named.
  EXPECT_FALSE(chat_ok(body, context(kThinkTemplate, "none")).reasoning.has_value());
  const char* plain = "{% for m in messages %}{{ m['content'] }}{% endfor %}";
  EXPECT_FALSE(chat_ok(body, context(plain)).reasoning.has_value());
  m = chat_ok(body, context(plain, "qwen3"));
  ASSERT_TRUE(m.reasoning.has_value());
  EXPECT_EQ(m.reasoning->start, ReasoningStart::MaybeTag);
  m = chat_ok(body, context(plain, "deepseek_r1"));
  EXPECT_EQ(m.reasoning->start, ReasoningStart::InReasoning);
  // A request's own chat_template is what auto-detection looks at.
  json own = body;
  own["chat_template"] = kThinkTemplate;
  EXPECT_TRUE(chat_ok(own, context(plain)).reasoning.has_value());
  EXPECT_FALSE(chat_ok(J(R"({"messages":[{"role":"user","content":"Hi"}],"chat_template":"{{ 1 }}"})"), context())
                   .reasoning.has_value());
}

TEST(ReasoningOutput, ConstraintAppliesAfterTheReasoning) {
  const ServerContext c = context();
  MappedRequest m = chat_ok(J(R"({"messages":[{"role":"user","content":"Hi"}]})"), c);
  // A constraint set by the request's other fields (response_format, tools) before map_reasoning runs.
  m.prompts[0].request.constraint.kind = OutputConstraint::Kind::JsonObject;
  map_reasoning(J(R"({"messages":[{"role":"user","content":"Hi"}]})"), c, m);
  EXPECT_EQ(m.prompts[0].request.constraint.after, "</think>");
  // No reasoning in the output (thinking off): the constraint starts at the first token.
  const json off = J(R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":false}})");
  m = chat_ok(off, c);
  m.prompts[0].request.constraint.kind = OutputConstraint::Kind::JsonObject;
  map_reasoning(off, c, m);
  EXPECT_EQ(m.prompts[0].request.constraint.after, "");
  // Unconstrained requests keep no `after`.
  EXPECT_EQ(chat_ok(J(R"({"messages":[{"role":"user","content":"Hi"}]})"), c).prompts[0].request.constraint.after, "");
}

TEST(ReasoningOutput, KwargsAndReasoningEffortReachRealTemplates) {
  ServerContext c = context();
  ApiError err;
  // Qwen3: enable_thinking false / true (texts as Jinja2 renders them; bos/eos come from the tokenizer).
  c.chat_template = real_template("Qwen-Qwen3-0.6B.jinja");
  auto off = render_chat_prompt(
      J(R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":false}})"), c, &err);
  ASSERT_TRUE(off.ok()) << off.error();
  EXPECT_EQ(*off, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  auto on = render_chat_prompt(
      J(R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":true}})"), c, &err);
  ASSERT_TRUE(on.ok());
  EXPECT_EQ(*on, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // gpt-oss reads reasoning_effort (default "medium"); it wins over a chat_template_kwargs entry.
  c.chat_template = real_template("openai-gpt-oss-120b.jinja");
  auto high = render_chat_prompt(J(R"({"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"high",
                                       "chat_template_kwargs":{"reasoning_effort":"low"}})"),
                                 c, &err);
  ASSERT_TRUE(high.ok()) << high.error();
  EXPECT_NE(high->find("\nReasoning: high\n\n"), std::string::npos) << *high;
  auto low = render_chat_prompt(
      J(R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"reasoning_effort":"low"}})"), c, &err);
  EXPECT_NE(low->find("\nReasoning: low\n\n"), std::string::npos);
  auto dflt = render_chat_prompt(J(R"({"messages":[{"role":"user","content":"Hi"}]})"), c, &err);
  EXPECT_NE(dflt->find("\nReasoning: medium\n\n"), std::string::npos);
  // Errors name the field.
  EXPECT_FALSE(render_chat_prompt(J(R"({"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"huge"})"), c,
                                  &err)
                   .ok());
  EXPECT_EQ(err.param, "reasoning_effort");
  EXPECT_FALSE(render_chat_prompt(J(R"({"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":3})"), c, &err)
                   .ok());
  EXPECT_EQ(err.param, "reasoning_effort");
  EXPECT_FALSE(render_chat_prompt(
                   J(R"({"messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"messages":[]}})"), c, &err)
                   .ok());
  EXPECT_EQ(err.param, "chat_template_kwargs");
}

TEST(ReasoningOutput, MessageFields) {
  MappedRequest m = chat_ok(J(R"({"messages":[{"role":"user","content":"Hi"}]})"), context());
  ChoiceOutput a;
  a.text = "\nplan</think>\n\nAnswer";
  a.finish = FinishReason::Stop;
  ChoiceOutput b;
  b.index = 1;
  b.text = "cut short";  // max_tokens hit inside the reasoning
  b.finish = FinishReason::Length;
  std::vector<ChoiceOutput> choices{a, b};
  split_reasoning_choices(m, choices);
  ResponseMeta meta;
  meta.id = "chatcmpl-1";
  meta.model = "stories";
  const json r = chat_response(meta, choices, Usage{1, 2, 0}, *stories_tokenizer(), {});
  EXPECT_EQ(dump_json(r["choices"][0]["message"]),
            R"({"role":"assistant","content":"\n\nAnswer","reasoning_content":"\nplan"})");
  EXPECT_EQ(dump_json(r["choices"][1]["message"]),
            R"({"role":"assistant","content":null,"reasoning_content":"cut short"})");
  EXPECT_EQ(r["choices"][1]["finish_reason"], "length");
  // include_reasoning: false drops the reasoning (vLLM).
  m = chat_ok(J(R"({"messages":[{"role":"user","content":"Hi"}],"include_reasoning":false})"), context());
  choices = {a};
  split_reasoning_choices(m, choices);
  EXPECT_EQ(dump_json(chat_response(meta, choices, Usage{}, *stories_tokenizer(), {})["choices"][0]["message"]),
            R"({"role":"assistant","content":"\n\nAnswer","reasoning_content":null})");
  // Without a split the message is unchanged.
  m = chat_ok(J(R"({"messages":[{"role":"user","content":"Hi"}]})"), context(kThinkTemplate, "none"));
  choices = {a};
  split_reasoning_choices(m, choices);
  EXPECT_EQ(dump_json(chat_response(meta, choices, Usage{}, *stories_tokenizer(), {})["choices"][0]["message"]),
            R"({"role":"assistant","content":"\nplan</think>\n\nAnswer"})");
}

TEST(ReasoningOutput, StreamingDeltas) {
  MappedRequest m = chat_ok(J(R"({"messages":[{"role":"user","content":"Hi"}]})"), context());
  auto streams = reasoning_streams(m, 2);
  ASSERT_EQ(streams.size(), 2u);
  std::vector<json> deltas;
  std::string content;
  for (const char* piece : {"Let me", " think</", "think>", "\n\nOK", "!"}) {
    json d = json::object();
    std::string c = reasoning_delta(m, streams[0], piece, false, d);
    if (!c.empty()) d["content"] = c;
    deltas.push_back(d);
  }
  json last = json::object();
  reasoning_delta(m, streams[0], "", true, last);
  EXPECT_EQ(dump_json(json(deltas)),
            R"([{"reasoning_content":"Let me"},{"reasoning_content":" think"},{},{"content":"\n\nOK"},)"
            R"({"content":"!"}])");
  EXPECT_TRUE(last.empty());
  // Cut by max_tokens in a partial end tag: the held-back text is reasoning, released with the finish.
  json d = json::object();
  EXPECT_EQ(reasoning_delta(m, streams[1], "abc </thi", false, d), "");
  EXPECT_EQ(d["reasoning_content"], "abc ");
  d = json::object();
  EXPECT_EQ(reasoning_delta(m, streams[1], "", true, d), "");
  EXPECT_EQ(d["reasoning_content"], "</thi");
  // No split: no streams.
  EXPECT_TRUE(reasoning_streams(chat_ok(J(R"({"messages":[{"role":"user","content":"Hi"}]})"),
                                        context(kThinkTemplate, "none")),
                                1)
                  .empty());
}

}  // namespace
