// Errors and limits of the interpreter through the public API (jinja/jinja.h): Python-style messages
// carrying the template line, and hostile templates that fail quickly with a clear message.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>
#include <pthread.h>

#include "jinja/jinja.h"

namespace {

using nlohmann::ordered_json;
using tmill::jinja::RenderOptions;

std::string render(const std::string& src, const RenderOptions& opts = {}) {
  auto p = tmill::jinja::parse(src);
  if (!p) return "PARSE ERROR: " + p.error();
  auto out = tmill::jinja::render(**p, ordered_json::object(), opts);
  return out ? *out : "ERROR: " + out.error();
}

std::string render_error(const std::string& src, const RenderOptions& opts = {}) {
  auto p = tmill::jinja::parse(src);
  if (!p) return p.error();
  auto out = tmill::jinja::render(**p, ordered_json::object(), opts);
  return out ? "no error, got: " + *out : out.error();
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

TEST(JinjaErrors, SyntaxErrorsCarryLineNumbers) {
  auto t = tmill::jinja::parse("line 1\nline 2 {{ ok }}\n{% if x %}\n{{ 1 + }}\n{% endif %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error(), "TemplateSyntaxError: unexpected 'end of print statement' (template line 4)");
  auto u = tmill::jinja::parse("a\nb\n{% for x in y %}\nno end");
  ASSERT_FALSE(u.ok());
  EXPECT_TRUE(starts_with(u.error(), "TemplateSyntaxError: Unexpected end of template. Jinja was looking for the "
                                     "following tags: 'endfor' or 'else'."))
      << u.error();
}

TEST(JinjaErrors, RuntimeErrorsCarryLineNumbers) {
  EXPECT_EQ(render_error("a\n{{ 'x' }}\n{{ 1 + 'a' }}"),
            "TypeError: unsupported operand type(s) for +: 'int' and 'str' (template line 3)");
  // Inside a macro: the line of the failing expression in the macro body.
  EXPECT_EQ(render_error("{% macro m() %}\n{{ raise_exception('boom') }}\n{% endmacro %}\n\n{{ m() }}"),
            "TemplateError: boom (template line 2)");
  EXPECT_EQ(render_error("{% set d = {} %}\n{{ d.a.b }}"), "UndefinedError: 'dict object' has no attribute 'a' (template line 2)");
}

// Found by fuzz_template in CI (stop 29): a string method called without its required argument read a
// null argument. Each now raises Python's TypeError.
TEST(JinjaErrors, StringMethodsMissingRequiredArgument) {
  EXPECT_EQ(render_error("{{ 'a'.rjust() }}"), "TypeError: rjust() missing required argument 'width' (template line 1)");
  EXPECT_EQ(render_error("{{ 'a'.ljust() }}"), "TypeError: ljust() missing required argument 'width' (template line 1)");
  EXPECT_EQ(render_error("{{ 'a'.center() }}"), "TypeError: center() missing required argument 'width' (template line 1)");
  EXPECT_EQ(render_error("{{ 'a'.zfill() }}"), "TypeError: zfill() missing required argument 'width' (template line 1)");
  EXPECT_EQ(render_error("{{ 'a'.partition() }}"), "TypeError: partition() missing required argument 'sep' (template line 1)");
  EXPECT_EQ(render_error("{{ 'a'.rpartition() }}"), "TypeError: rpartition() missing required argument 'sep' (template line 1)");
  EXPECT_EQ(render_error("{{ 'a'.removeprefix() }}"),
            "TypeError: removeprefix() missing required argument 'affix' (template line 1)");
  EXPECT_EQ(render_error("{{ 'a'.removesuffix() }}"),
            "TypeError: removesuffix() missing required argument 'affix' (template line 1)");
  EXPECT_EQ(render("{{ 'a'.rjust(3, '.') }}|{{ 'ab'.partition('a')[2] }}"), "..a|b");
}

// ---- limits: hostile templates fail quickly with a clear message ----

TEST(JinjaLimits, RunawayNestedLoops) {
  RenderOptions opts;
  opts.max_steps = 200'000;
  auto t0 = std::chrono::steady_clock::now();
  std::string err = render_error("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", opts);
  EXPECT_TRUE(starts_with(err, "ResourceLimitError: template rendering exceeded its step budget")) << err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

TEST(JinjaLimits, ExponentialMacroRecursion) {
  RenderOptions opts;
  opts.max_steps = 100'000;
  std::string err = render_error(
      "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}", opts);
  EXPECT_TRUE(starts_with(err, "ResourceLimitError")) << err;
}

TEST(JinjaLimits, InfiniteRecursion) {
  std::string err = render_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}");
  EXPECT_TRUE(starts_with(err, "ResourceLimitError: maximum template recursion depth")) << err;
  err = render_error("{% macro a(n) %}{{ b(n) }}{% endmacro %}{% macro b(n) %}x{{ a(n) }}{% endmacro %}{{ a(1) }}");
  EXPECT_TRUE(starts_with(err, "ResourceLimitError")) << err;
}

TEST(JinjaLimits, RecursionOnSmallThreadStack) {
  // A 256 KiB thread stack is far too small for max_depth=500; the stack guard must stop first.
  std::string err;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t th;
  auto fn = [](void* p) -> void* {
    *static_cast<std::string*>(p) = render_error("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}");
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&th, &attr, fn, &err), 0);
  pthread_join(th, nullptr);
  pthread_attr_destroy(&attr);
  EXPECT_TRUE(starts_with(err, "ResourceLimitError")) << err;
}

TEST(JinjaLimits, HugeOutput) {
  RenderOptions opts;
  opts.max_output_bytes = 1 << 20;
  std::string err = render_error("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", opts);
  EXPECT_TRUE(starts_with(err, "ResourceLimitError: template output exceeds 1048576 bytes")) << err;
}

TEST(JinjaLimits, MemoryBlowup) {
  RenderOptions opts;
  opts.max_alloc_bytes = 64 << 20;
  std::string err = render_error(
      "{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", opts);
  EXPECT_TRUE(starts_with(err, "ResourceLimitError: template rendering exceeded its memory budget")) << err;
  err = render_error("{{ 'x' * 10000000000 }}");  // refused before allocating 10 GB
  EXPECT_TRUE(starts_with(err, "ResourceLimitError")) << err;
  err = render_error("{{ ([1] * 100000) * 100000 }}");
  EXPECT_TRUE(starts_with(err, "ResourceLimitError")) << err;
}

TEST(JinjaLimits, DeepValueNesting) {
  std::string err = render_error(
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|length }}");
  EXPECT_TRUE(starts_with(err, "ResourceLimitError: value nesting too deep")) << err;
  // A namespace that contains itself prints without crashing (bounded recursion), and is freed.
  err = render_error("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  EXPECT_TRUE(starts_with(err, "RecursionError")) << err;
}

TEST(JinjaLimits, DeeplyNestedSource) {
  std::string deep_parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_TRUE(starts_with(render_error(deep_parens), "TemplateSyntaxError: expression is nested too deeply"));
  std::string nots;
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_TRUE(starts_with(render_error("{{ " + nots + "1 }}"), "TemplateSyntaxError: expression is nested too deeply"));
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  EXPECT_TRUE(starts_with(render_error(chain + " }}"), "TemplateSyntaxError: expression is nested too deeply"));
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if 1 %}";
  EXPECT_TRUE(starts_with(render_error(ifs), "TemplateSyntaxError: template blocks are nested too deeply"));
  // Moderate nesting is fine.
  EXPECT_EQ(render("{{ " + std::string(50, '(') + "1" + std::string(50, ')') + " }}"), "1");
}

TEST(JinjaLimits, SandboxRange) {
  EXPECT_TRUE(starts_with(render_error("{% for i in range(10**9) %}{% endfor %}"), "OverflowError: Range too big."));
}

}  // namespace

// DeepSeek V3.2/V4-style templates name `from_json` (which neither Jinja2 nor Hugging Face defines) only in
// their tool branches: conversations without tool calls must render, as under Jinja2; a tool call
// reaches the filter and fails at render time with the template line of the use.
TEST(JinjaErrors, UnknownFilterInUntakenBranchRendersAndFailsWhenRun) {
  const std::string src =
      "{% for m in messages %}\n"
      "{% if m.tool_calls %}\n"
      "{% for tc in m.tool_calls %}{% if tc.arguments is string %}{% set args = tc.arguments | from_json %}"
      "{% endif %}{% endfor %}\n"
      "{% else %}{{ m.role }}: {{ m.content }}\n{% endif %}\n"
      "{% endfor %}";
  auto p = tmill::jinja::parse(src);
  ASSERT_TRUE(p.ok()) << p.error();
  auto plain = ordered_json::parse(R"({"messages":[{"role":"user","content":"hi"}]})");
  auto out = tmill::jinja::render(**p, plain);
  ASSERT_TRUE(out.ok()) << out.error();
  EXPECT_EQ(*out, "user: hi\n");
  auto tools = ordered_json::parse(R"({"messages":[{"role":"assistant","tool_calls":[{"arguments":"{}"}]}]})");
  auto bad = tmill::jinja::render(**p, tools);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), "TemplateRuntimeError: No filter named 'from_json' found. (template line 3)");
  // Outside any if the unknown filter is a compile error, as in Jinja2.
  EXPECT_EQ(render_error("a\n{{ x | from_json }}"), "TemplateAssertionError: No filter named 'from_json'. (template line 2)");
}
