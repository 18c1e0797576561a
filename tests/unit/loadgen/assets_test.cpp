// The build-time asset embedding (cmake/tm_embed.cmake) as the HTML report uses it: every file under
// src/loadgen/assets/ listed in tm_embed_assets is in the binary byte for byte, with its content type.
#include <gtest/gtest.h>

#include <string>

#include "core/mmap.h"
#include "loadgen/embedded_assets.h"
#include "test_support.h"

namespace tmill::loadgen {
namespace {

TEST(EmbeddedAssets, BytesEqualTheSourceFiles) {
  for (const char* name : {"report.css", "report.js"}) {
    const EmbeddedAsset* a = assets::find(name);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->path, name);
    auto file = read_file(test::source_path(std::string("src/loadgen/assets/") + name));
    ASSERT_TRUE(file.ok()) << file.error();
    EXPECT_EQ(a->bytes, *file) << name;
  }
  EXPECT_EQ(assets::find("report.js")->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(assets::find("report.css")->content_type, "text/css; charset=utf-8");
}

TEST(EmbeddedAssets, ListsEveryFileSortedAndFindsOnlyThose) {
  auto all = assets::all();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].path, "report.css");
  EXPECT_EQ(all[1].path, "report.js");
  EXPECT_EQ(assets::find("report"), nullptr);
  EXPECT_EQ(assets::find("assets/report.js"), nullptr);
  EXPECT_EQ(assets::find(""), nullptr);
}

}  // namespace
}  // namespace tmill::loadgen
