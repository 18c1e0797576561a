// Conformance: every golden in tests/data/chat-templates/goldens (25 real templates x 4 conversations,
// rendered by Jinja2 3.1.6 the way Hugging Face does) must render byte-identically, or fail where
// Jinja2 raised, with the same "<ExceptionType>: <message>".
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/mmap.h"
#include "test_support.h"

namespace {

using nlohmann::ordered_json;

struct GoldenCount {
  int total = 0, passed = 0, templates = 0;
};

// Renders every golden of one folder (goldens/ or tool-goldens/) and counts the matches.
GoldenCount check_goldens(const std::string& folder) {
  const std::string dir = tmill::test::source_path("tests/data/chat-templates");
  int total = 0, passed = 0, templates = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/" + folder)) {
    if (entry.path().extension() != ".json") continue;
    ++templates;
    auto text = tmill::read_file(entry.path().string());
    EXPECT_TRUE(text.ok()) << text.error();
    if (!text.ok()) continue;
    ordered_json golden = ordered_json::parse(*text);
    const std::string name = golden["template"].get<std::string>();
    auto src = tmill::read_file(dir + "/templates/" + name);
    EXPECT_TRUE(src.ok()) << src.error();
    if (!src.ok()) continue;
    auto tmpl = tmill::ChatTemplate::parse(*src);
    EXPECT_TRUE(tmpl.ok()) << name << ": " << tmpl.error();
    if (!tmpl.ok()) continue;
    auto now = tmill::parse_iso_time(golden["fixed_now"].get<std::string>());
    EXPECT_TRUE(now.ok());
    tmill::RenderOptions opts;
    opts.now = *now;
    for (const auto& c : golden["cases"]) {
      ++total;
      SCOPED_TRACE(name + " / " + c["name"].get<std::string>());
      auto out = tmpl->render(c["context"], opts);
      if (c.contains("expected")) {
        const std::string want = c["expected"].get<std::string>();
        if (out.ok() && *out == want) {
          ++passed;
        } else {
          ADD_FAILURE() << (out.ok() ? "text differs:\n--- got ---\n" + *out + "\n--- want ---\n" + want
                                     : "unexpected error: " + out.error());
        }
      } else {
        const std::string want = c["expected_error"].get<std::string>();
        if (!out.ok() && out.error().rfind(want, 0) == 0) {
          ++passed;
        } else {
          ADD_FAILURE() << "want error '" << want << "', got " << (out.ok() ? "text: " + *out : out.error());
        }
      }
    }
  }
  std::printf("chat template %s: %d/%d cases passed (%d templates)\n", folder.c_str(), passed, total, templates);
  return {total, passed, templates};
}

TEST(ChatGoldens, AllTemplatesMatchJinja2) {
  GoldenCount c = check_goldens("goldens");
  RecordProperty("goldens_passed", c.passed);
  RecordProperty("goldens_total", c.total);
  EXPECT_EQ(c.templates, 25);
  EXPECT_EQ(c.total, 100);
  EXPECT_EQ(c.passed, c.total);
}

// Tool calls as clients send them back (make_tool_goldens.py): arguments as a JSON string and as an
// object, parallel calls, several tool results, content null next to tool calls. Jinja2's text, or the
// error it raised (several templates refuse string arguments or null content; vLLM parses arguments and
// turns null content into "" before rendering, see chat/messages.h).
TEST(ChatGoldens, ToolCallConversationsMatchJinja2) {
  GoldenCount c = check_goldens("tool-goldens");
  EXPECT_EQ(c.templates, 25);
  EXPECT_EQ(c.total, 100);
  EXPECT_EQ(c.passed, c.total);
}

}  // namespace
