// Conformance: every golden in tests/data/chat-templates/goldens (24 real templates x 4 conversations,
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

TEST(ChatGoldens, AllTemplatesMatchJinja2) {
  const std::string dir = tmill::test::source_path("tests/data/chat-templates");
  int total = 0, passed = 0, templates = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/goldens")) {
    if (entry.path().extension() != ".json") continue;
    ++templates;
    auto text = tmill::read_file(entry.path().string());
    ASSERT_TRUE(text.ok()) << text.error();
    ordered_json golden = ordered_json::parse(*text);
    const std::string name = golden["template"].get<std::string>();
    auto src = tmill::read_file(dir + "/templates/" + name);
    ASSERT_TRUE(src.ok()) << src.error();
    auto tmpl = tmill::ChatTemplate::parse(*src);
    ASSERT_TRUE(tmpl.ok()) << name << ": " << tmpl.error();
    auto now = tmill::parse_iso_time(golden["fixed_now"].get<std::string>());
    ASSERT_TRUE(now.ok());
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
  std::printf("chat template goldens: %d/%d cases passed (%d templates)\n", passed, total, templates);
  RecordProperty("goldens_passed", passed);
  RecordProperty("goldens_total", total);
  EXPECT_EQ(templates, 24);
  EXPECT_EQ(total, 96);
  EXPECT_EQ(passed, total);
}

}  // namespace
