// Jinja semantics against real Jinja2: tests/data/chat-templates/jinja_cases.json holds ~200 small
// templates (whitespace control, trim/lstrip_blocks, loops, scoping, macros, namespaces, slicing, filters,
// tests, methods, undefined behaviour, errors) with the text or error Jinja2 3.1.6 produced
// (see make_jinja_cases.py and PROVENANCE.txt).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "core/mmap.h"
#include "jinja/jinja.h"
#include "test_support.h"

namespace {

using nlohmann::ordered_json;

TEST(JinjaCases, MatchJinja2) {
  auto text = tmill::read_file(tmill::test::source_path("tests/data/chat-templates/jinja_cases.json"));
  ASSERT_TRUE(text.ok()) << text.error();
  ordered_json all = ordered_json::parse(*text);
  auto now = tmill::jinja::parse_iso_time(all["fixed_now"].get<std::string>());
  ASSERT_TRUE(now.ok());
  tmill::jinja::RenderOptions opts;
  opts.now = *now;
  int total = 0, passed = 0, errors = 0;
  for (const auto& c : all["cases"]) {
    ++total;
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name + ": " + c["template"].get<std::string>());
    auto prog = tmill::jinja::parse(c["template"].get<std::string>());
    tmill::Result<std::string> out =
        prog.ok() ? tmill::jinja::render(**prog, c["context"], opts) : tmill::Result<std::string>(prog.error_value());
    if (c.contains("expected")) {
      const std::string want = c["expected"].get<std::string>();
      if (out.ok() && *out == want) ++passed;
      else ADD_FAILURE() << "want: " << want << "\ngot: " << (out.ok() ? *out : "error " + out.error());
      continue;
    }
    ++errors;
    const std::string want = c["expected_error"].get<std::string>();
    bool ok = !out.ok() && out.error().rfind(want, 0) == 0;
    if (ok && c.contains("error_line")) {
      const std::string line = "(template line " + std::to_string(c["error_line"].get<int>()) + ")";
      ok = out.error().find(line) != std::string::npos;
    }
    if (ok) ++passed;
    else ADD_FAILURE() << "want error: " << want << "\ngot: " << (out.ok() ? "text " + *out : out.error());
  }
  std::printf("jinja cases: %d/%d passed (%d error cases)\n", passed, total, errors);
  EXPECT_GE(total, 200);
  EXPECT_EQ(passed, total);
}

}  // namespace
