// The reasoning split (chat/reasoning.h): named parsers, where the output starts judged from real
// templates' generation prompts (texts rendered by Jinja2 3.1.6), the split of finished text, and the
// streaming split, which must agree with it at every cut of the input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/reasoning.h"
#include "core/mmap.h"
#include "test_support.h"

namespace {

using nlohmann::ordered_json;
using tmill::ReasoningParserSpec;
using tmill::ReasoningSplit;
using tmill::ReasoningStart;
using tmill::ReasoningStream;

ReasoningParserSpec parser(const std::string& name) {
  auto p = tmill::reasoning_parser(name);
  EXPECT_TRUE(p.ok()) << p.error();
  EXPECT_TRUE(p->has_value());
  return **p;
}

// Streams `text` cut at the given positions and returns what the deltas add up to.
ReasoningSplit stream(const std::string& text, const ReasoningParserSpec& spec, ReasoningStart start,
                      const std::vector<size_t>& cuts) {
  ReasoningStream st(spec, start);
  ReasoningSplit out;
  std::string reasoning;
  size_t at = 0;
  auto add = [&](const ReasoningStream::Delta& d) {
    reasoning += d.reasoning;
    out.content += d.content;
  };
  for (size_t c : cuts) {
    add(st.feed(std::string_view(text).substr(at, c - at)));
    at = c;
  }
  add(st.feed(std::string_view(text).substr(at)));
  add(st.finish());
  if (st.saw_reasoning()) out.reasoning = reasoning;
  else EXPECT_EQ(reasoning, "");
  return out;
}

void expect_split(const std::string& text, const ReasoningParserSpec& spec, ReasoningStart start,
                  std::optional<std::string> reasoning, const std::string& content) {
  SCOPED_TRACE("text: " + text);
  ReasoningSplit whole = tmill::split_reasoning(text, spec, start);
  EXPECT_EQ(whole.reasoning, reasoning);
  EXPECT_EQ(whole.content, content);
  // Every single cut and every pair of cuts gives the same result.
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size(); ++j) {
      ReasoningSplit s = stream(text, spec, start, {i, j});
      ASSERT_EQ(s.reasoning, reasoning) << "cuts " << i << "," << j;
      ASSERT_EQ(s.content, content) << "cuts " << i << "," << j;
    }
  }
  // One byte at a time.
  std::vector<size_t> all;
  for (size_t i = 1; i < text.size(); ++i) all.push_back(i);
  ReasoningSplit s = stream(text, spec, start, all);
  EXPECT_EQ(s.reasoning, reasoning);
  EXPECT_EQ(s.content, content);
}

TEST(Reasoning, NamedParsers) {
  EXPECT_FALSE(tmill::reasoning_parser("none")->has_value());
  EXPECT_TRUE(parser("deepseek_r1").implicit_start);
  EXPECT_FALSE(parser("qwen3").implicit_start);
  EXPECT_EQ(parser("seed_oss").end, "</seed:think>");
  auto bad = tmill::reasoning_parser("nope");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("unknown reasoning parser 'nope' (known: none, deepseek_r1"), std::string::npos);
  EXPECT_FALSE(tmill::reasoning_parser_for_template("{{ messages }}").has_value());
  EXPECT_TRUE(tmill::reasoning_parser_for_template("a <think> b </think>").has_value());
}

TEST(Reasoning, StartFromRealGenerationPrompts) {
  const auto qwen3 = parser("qwen3");
  const auto r1 = parser("deepseek_r1");
  // Qwen3-0.6B: enable_thinking unset / false (Jinja2's renders).
  EXPECT_EQ(tmill::reasoning_start(qwen3, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
            ReasoningStart::MaybeTag);
  EXPECT_EQ(tmill::reasoning_start(qwen3, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
            ReasoningStart::None);
  // DeepSeek-V3.1, thinking on / off.
  EXPECT_EQ(tmill::reasoning_start(qwen3, "<s><｜User｜>Hi<｜Assistant｜><think>"), ReasoningStart::InReasoning);
  EXPECT_EQ(tmill::reasoning_start(r1, "<s><｜User｜>Hi<｜Assistant｜><think></think>"), ReasoningStart::None);
  // DeepSeek-R1 opening the reasoning with a newline; earlier turns' closed blocks do not count.
  EXPECT_EQ(tmill::reasoning_start(qwen3, "<think>\nold\n</think>\n\nanswer<｜User｜>Q<｜Assistant｜><think>\n"),
            ReasoningStart::InReasoning);
  // No marker at the end: the parser's default.
  EXPECT_EQ(tmill::reasoning_start(r1, "<｜User｜>Q<｜Assistant｜>"), ReasoningStart::InReasoning);
  EXPECT_EQ(tmill::reasoning_start(qwen3, "<think>\nold\n</think>\n\nanswer<|im_start|>assistant\n"),
            ReasoningStart::MaybeTag);
}

TEST(Reasoning, SplitsAtEveryCut) {
  const auto q = parser("qwen3");
  // The model opens the block itself (Qwen3 with thinking on).
  expect_split("<think>\nplan\n</think>\n\nHello!", q, ReasoningStart::MaybeTag, "\nplan\n", "\n\nHello!");
  expect_split("\n <think>a</think>b", q, ReasoningStart::MaybeTag, "a", "b");
  expect_split("<think></think>", q, ReasoningStart::MaybeTag, "", "");
  // No opening tag: all answer, even when a tag comes later.
  expect_split("Hi <think>x</think> y", q, ReasoningStart::MaybeTag, std::nullopt, "Hi <think>x</think> y");
  expect_split("<thin", q, ReasoningStart::MaybeTag, std::nullopt, "<thin");
  expect_split("  ", q, ReasoningStart::MaybeTag, std::nullopt, "  ");
  expect_split("", q, ReasoningStart::MaybeTag, std::nullopt, "");
  // The prompt opened the block: no opening tag in the output (DeepSeek-R1).
  expect_split("\nOkay, so</think>\n\nAnswer", q, ReasoningStart::InReasoning, "\nOkay, so", "\n\nAnswer");
  expect_split("<think>\nx</think>y", q, ReasoningStart::InReasoning, "\nx", "y");  // repeated tag dropped
  expect_split("a</think>b</think>c", q, ReasoningStart::InReasoning, "a", "b</think>c");
  expect_split("", q, ReasoningStart::InReasoning, "", "");
  // Unterminated (cut by max_tokens): everything is reasoning, partial end tag included.
  expect_split("one two </thi", q, ReasoningStart::InReasoning, "one two </thi", "");
  expect_split(" <thi", q, ReasoningStart::InReasoning, " <thi", "");
  expect_split("<think>never closed", q, ReasoningStart::MaybeTag, "never closed", "");
  // Thinking switched off in the prompt: markers are plain text.
  expect_split("<think>x</think>y", q, ReasoningStart::None, std::nullopt, "<think>x</think>y");
  // Other markers, multi-byte text around them.
  const auto seed = parser("seed_oss");
  expect_split("<seed:think>é思</seed:think>答", seed, ReasoningStart::MaybeTag, "é思", "答");
  // Gemma 4's thinking channel
  const auto g4 = parser("gemma4");
  expect_split("<|channel>thought\nplan<channel|>Hello", g4, ReasoningStart::MaybeTag, "plan", "Hello");
  expect_split("Hello", g4, ReasoningStart::MaybeTag, std::nullopt, "Hello");
}

TEST(Reasoning, StreamHoldsBackOnlyPossibleMarkers) {
  ReasoningStream st(parser("qwen3"), ReasoningStart::InReasoning);
  auto d = st.feed("abc");
  EXPECT_EQ(d.reasoning, "abc");  // cannot be the start tag: released at once
  d = st.feed(" x</th");
  EXPECT_EQ(d.reasoning, " x");  // "</th" may be the end tag
  d = st.feed("ink>Hi");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Hi");
  d = st.feed(" there");
  EXPECT_EQ(d.content, " there");
  EXPECT_TRUE(st.finish().empty());

  ReasoningStream m(parser("qwen3"), ReasoningStart::MaybeTag);
  EXPECT_TRUE(m.feed("\n<th").empty());  // may still open the block
  d = m.feed("e");
  EXPECT_EQ(d.content, "\n<the");
  EXPECT_FALSE(m.saw_reasoning());
}

TEST(Reasoning, TemplateKwargsReachQwen3AndGptOss) {
  // Texts rendered by Jinja2 3.1.6 in Hugging Face's environment for the same inputs.
  const std::string dir = tmill::test::source_path("tests/data/chat-templates/templates/");
  ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
  auto qsrc = tmill::read_file(dir + "Qwen-Qwen3-0.6B.jinja");
  ASSERT_TRUE(qsrc.ok());
  auto qwen3 = tmill::ChatTemplate::parse(*qsrc);
  ASSERT_TRUE(qwen3.ok());
  ordered_json on = {{"enable_thinking", true}}, off = {{"enable_thinking", false}};
  EXPECT_EQ(*tmill::apply_chat_template(*qwen3, messages, true, "<s>", "</s>", nullptr, &on),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(*tmill::apply_chat_template(*qwen3, messages, true, "<s>", "</s>", nullptr, &off),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // Keys that are the conversation itself are not overridden by extra context.
  ordered_json sneaky = {{"messages", ordered_json::array()}, {"add_generation_prompt", false}};
  EXPECT_EQ(*tmill::apply_chat_template(*qwen3, messages, true, "<s>", "</s>", nullptr, &sneaky),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");

  auto gsrc = tmill::read_file(dir + "openai-gpt-oss-120b.jinja");
  ASSERT_TRUE(gsrc.ok());
  auto oss = tmill::ChatTemplate::parse(*gsrc);
  ASSERT_TRUE(oss.ok());
  tmill::RenderOptions opts;
  opts.now = *tmill::parse_iso_time("2026-01-15T09:30:00");
  ordered_json high = {{"reasoning_effort", "high"}};
  EXPECT_EQ(*tmill::apply_chat_template(*oss, messages, true, "<s>", "</s>", nullptr, &high, opts),
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
            "Knowledge cutoff: 2024-06\nCurrent date: 2026-01-15\n\nReasoning: high\n\n"
            "# Valid channels: analysis, commentary, final. Channel must be included for every message."
            "<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant");
}

}  // namespace

namespace {

// Auto-detection and the start of the output on the real templates' generation prompts (one user turn),
// with enable_thinking unset, true and false.
TEST(Reasoning, RealTemplatesDetectionAndStart) {
  struct Want {
    const char* file;
    const char* unset;
    const char* on;
    const char* off;
  };
  // M: MaybeTag, R: InReasoning, N: None, -: no parser detected.
  const Want wants[] = {
      {"Qwen-Qwen3-0.6B.jinja", "M", "M", "N"},
      {"Qwen-QwQ-32B.jinja", "N", "R", "N"},  // llama.cpp's variant closes the block unless enable_thinking
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "N", "R", "N"},
      {"deepseek-ai-DeepSeek-V3.1.jinja", "N", "R", "N"},
      {"GLM-4.6.jinja", "M", "M", "N"},
      {"HuggingFaceTB-SmolLM3-3B.jinja", "M", "M", "N"},
      {"MiniMax-M2.jinja", "R", "R", "R"},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", "-", "-", "-"},
      {"moonshotai-Kimi-K2.jinja", "-", "-", "-"},
      {"google-gemma-4-31B-it.jinja", "N", "M", "N"},  // (its thinking channel: on with enable_thinking)
  };
  auto code = [](ReasoningStart s) {
    return s == ReasoningStart::MaybeTag ? "M" : s == ReasoningStart::InReasoning ? "R" : "N";
  };
  ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
  tmill::RenderOptions opts;
  opts.now = *tmill::parse_iso_time("2026-01-15T09:30:00");
  for (const Want& w : wants) {
    SCOPED_TRACE(w.file);
    auto src = tmill::read_file(tmill::test::source_path(std::string("tests/data/chat-templates/templates/") + w.file));
    ASSERT_TRUE(src.ok());
    auto tmpl = tmill::ChatTemplate::parse(*src);
    ASSERT_TRUE(tmpl.ok());
    auto spec = tmill::reasoning_parser_for_template(*src);
    const char* got[3];
    const ordered_json kwargs[3] = {ordered_json::object(), {{"enable_thinking", true}}, {{"enable_thinking", false}}};
    for (int k = 0; k < 3; ++k) {
      auto prompt = tmill::apply_chat_template(*tmpl, messages, true, "<s>", "</s>", nullptr, &kwargs[k], opts);
      ASSERT_TRUE(prompt.ok()) << prompt.error();
      got[k] = spec ? code(tmill::reasoning_start(*spec, *prompt)) : "-";
    }
    EXPECT_STREQ(got[0], w.unset);
    EXPECT_STREQ(got[1], w.on);
    EXPECT_STREQ(got[2], w.off);
  }
}

}  // namespace
