// ChatTemplate API (parse/render over the jinja module, apply_chat_template, the ChatML fallback, the fixed
// clock, concurrent renders) and the render-template CLI. The interpreter's errors and limits: tests/unit/jinja.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/mmap.h"
#include "test_support.h"

namespace {

using nlohmann::ordered_json;
using tmill::ChatTemplate;
using tmill::RenderOptions;

std::string render(const std::string& src, const ordered_json& ctx = ordered_json::object(),
                   const RenderOptions& opts = {}) {
  auto t = ChatTemplate::parse(src);
  if (!t) return "PARSE ERROR: " + t.error();
  auto out = t->render(ctx, opts);
  return out ? *out : "ERROR: " + out.error();
}

std::string render_error(const std::string& src, const RenderOptions& opts = {}) {
  auto t = ChatTemplate::parse(src);
  if (!t) return t.error();
  auto out = t->render(ordered_json::object(), opts);
  return out ? "no error, got: " + *out : out.error();
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

TEST(ChatTemplate, RendersWithContextVariables) {
  ordered_json ctx = {{"name", "tokenmill"}, {"n", 3}, {"xs", {1, 2, 3}}};
  EXPECT_EQ(render("{{ name|upper }}:{{ n * 2 }}:{{ xs|sum }}", ctx), "TOKENMILL:6:6");
}

TEST(ChatTemplate, KeepsContextKeyOrderInTojson) {
  // nlohmann::ordered_json keeps insertion order; Python dicts do too, and tojson must not sort.
  ordered_json ctx = ordered_json::parse(R"({"d": {"zeta": 1, "alpha": {"y": 2, "b": 3}}})");
  EXPECT_EQ(render("{{ d|tojson }}", ctx), R"({"zeta": 1, "alpha": {"y": 2, "b": 3}})");
}

TEST(ChatTemplate, RejectsInvalidInput) {
  EXPECT_FALSE(ChatTemplate::parse(std::string("{{ 'a\xff' }}")).ok());  // not UTF-8
  auto t = ChatTemplate::parse("x");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->render(ordered_json::array()).ok());  // context must be an object
  EXPECT_TRUE(starts_with(render_error("{% include 'x.jinja' %}"), "TemplateSyntaxError: 'include' is not supported"));
  EXPECT_TRUE(starts_with(render_error("{% do x %}"), "TemplateSyntaxError: Encountered unknown tag 'do'."));
  EXPECT_TRUE(starts_with(render_error("{% break %}"), "TemplateSyntaxError: 'break' outside of a loop"));
}

// ---- API helpers ----

TEST(ChatTemplate, ApplyChatTemplateQwen3EnableThinking) {
  auto src = tmill::read_file(tmill::test::source_path("tests/data/chat-templates/templates/Qwen-Qwen3-0.6B.jinja"));
  ASSERT_TRUE(src.ok());
  auto tmpl = ChatTemplate::parse(*src);
  ASSERT_TRUE(tmpl.ok()) << tmpl.error();
  ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
  ordered_json extra = {{"enable_thinking", false}};
  // Expected text rendered by Jinja2 3.1.6 (HF environment) for the same inputs.
  auto out = tmill::apply_chat_template(*tmpl, messages, true, "<s>", "</s>", nullptr, &extra);
  ASSERT_TRUE(out.ok()) << out.error();
  EXPECT_EQ(*out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  auto plain = tmill::apply_chat_template(*tmpl, messages, false, "<s>", "</s>");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, FallbackIsChatML) {
  auto tmpl = tmill::chat_template_for_model("", "test-model");
  ASSERT_TRUE(tmpl.ok()) << tmpl.error();
  EXPECT_EQ(tmpl->source(), tmill::fallback_chat_template());
  ordered_json messages = ordered_json::parse(
      R"([{"role": "system", "content": "S"}, {"role": "user", "content": [{"type": "text", "text": "a"},
          {"type": "image"}, {"type": "text", "text": "b"}]}])");
  auto out = tmill::apply_chat_template(*tmpl, messages, true, "", "");
  ASSERT_TRUE(out.ok()) << out.error();
  // Same text Jinja2 renders for this template and input.
  EXPECT_EQ(*out, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nab<|im_end|>\n<|im_start|>assistant\n");
  auto own = tmill::chat_template_for_model("{{ messages|length }}", "m");
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(*own->render({{"messages", messages}}), "2");
}

TEST(ChatTemplate, StrftimeNowUsesFixedTimeOrClock) {
  auto t = tmill::parse_iso_time("2026-01-15T09:30:00");
  ASSERT_TRUE(t.ok());
  RenderOptions opts;
  opts.now = *t;
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M:%S %A %B') }}", ordered_json::object(), opts),
            "2026-01-15 09:30:00 Thursday January");
  auto z = tmill::parse_iso_time("2026-01-15T10:30:00+01:00");
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(*z, *t);
  EXPECT_FALSE(tmill::parse_iso_time("2026-13-01").ok());
  EXPECT_FALSE(tmill::parse_iso_time("yesterday").ok());
  // Without a fixed time: the real clock (a plausible year).
  int year = std::stoi(render("{{ strftime_now('%Y') }}"));
  EXPECT_GE(year, 2024);
}

TEST(ChatTemplate, ConcurrentRendersAgree) {
  auto src = tmill::read_file(tmill::test::source_path("tests/data/chat-templates/templates/openai-gpt-oss-120b.jinja"));
  ASSERT_TRUE(src.ok());
  auto tmpl = ChatTemplate::parse(*src);
  ASSERT_TRUE(tmpl.ok());
  ordered_json ctx = {{"messages", ordered_json::parse(R"([{"role": "user", "content": "Hello"}])")},
                      {"add_generation_prompt", true}};
  RenderOptions opts;
  opts.now = *tmill::parse_iso_time("2026-01-15T09:30:00");
  auto ref = tmpl->render(ctx, opts);
  ASSERT_TRUE(ref.ok()) << ref.error();
  std::vector<std::thread> threads;
  std::vector<int> same(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; i < 20; ++i) {
        auto out = tmpl->render(ctx, opts);
        same[k] += out.ok() && *out == *ref;
      }
    });
  for (auto& th : threads) th.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(same[k], 20);
}

// ---- CLI ----

std::string write_temp(const std::string& name, const std::string& content) {
  std::string path = tmill::test::temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(RenderTemplateCli, PrintsExactTextAndErrors) {
  std::string tpl = write_temp("t.jinja", "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
                                          "{% if add_generation_prompt %}>{% endif %}{{ strftime_now('%Y') }}\n");
  std::string ctx = write_temp("c.json", R"({"messages": [{"role": "user", "content": "hi"}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  auto bin = tmill::test::tokenmill_binary();
  auto r = tmill::test::run_command(bin + " render-template --template " + tpl + " --context " + ctx +
                                    " --now 2026-01-15T09:30:00");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "<s>[user:hi]>2026");  // no newline added (and the template's trailing one is dropped)

  std::string bad = write_temp("bad.jinja", "ok\n{{ raise_exception('no system role') }}");
  r = tmill::test::run_command(bin + " render-template --template " + bad + " --context " + ctx);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("TemplateError: no system role (template line 2)"), std::string::npos) << r.err;

  std::string syntax = write_temp("syntax.jinja", "{% if %}");
  r = tmill::test::run_command(bin + " render-template --template " + syntax + " --context " + ctx);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("TemplateSyntaxError"), std::string::npos) << r.err;

  r = tmill::test::run_command(bin + " render-template --template " + tpl + " --context " + ctx + " --now bogus");
  EXPECT_EQ(r.exit_code, 1);
}

TEST(RenderTemplateCli, MatchesAGolden) {
  const std::string dir = tmill::test::source_path("tests/data/chat-templates");
  auto golden_text = tmill::read_file(dir + "/goldens/mistralai-Mistral-Nemo-Instruct-2407.json");
  ASSERT_TRUE(golden_text.ok());
  ordered_json golden = ordered_json::parse(*golden_text);
  const auto& c = golden["cases"][1];
  std::string ctx = write_temp("golden_ctx.json", c["context"].dump());
  auto r = tmill::test::run_command(tmill::test::tokenmill_binary() + " render-template --template " + dir +
                                    "/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja --context " + ctx);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, c["expected"].get<std::string>());
}

}  // namespace
