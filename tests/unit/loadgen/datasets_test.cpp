#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "loadgen/datasets.h"
#include "test_support.h"

namespace tmill::loadgen {
namespace {

int words(const std::string& s) {
  std::istringstream in(s);
  std::string w;
  int n = 0;
  while (in >> w) ++n;
  return n;
}

TEST(Datasets, WordListHasUniqueSingleWords) {
  const auto& w = word_list();
  EXPECT_GE(w.size(), 200u);
  std::set<std::string_view> uniq(w.begin(), w.end());
  EXPECT_EQ(uniq.size(), w.size());
  for (auto s : w) EXPECT_EQ(s.find(' '), std::string_view::npos);
}

TEST(Datasets, RandomExactLengthsWithoutRange) {
  auto p = build_random_dataset({20, 100, 30, 0.0, 5});
  ASSERT_EQ(p.size(), 20u);
  for (const auto& x : p) {
    EXPECT_EQ(words(x.text), 100);
    EXPECT_EQ(x.approx_tokens, 100);
    EXPECT_EQ(x.max_tokens, 30);
    EXPECT_TRUE(x.messages.is_null());
  }
  EXPECT_NE(p[0].text, p[1].text);
}

TEST(Datasets, RandomRangeRatioBoundsAndSeed) {
  auto p = build_random_dataset({500, 100, 40, 0.5, 11});
  int lo = 1000, hi = 0, olo = 1000, ohi = 0;
  for (const auto& x : p) {
    int n = words(x.text);
    EXPECT_EQ(n, x.approx_tokens);
    lo = std::min(lo, n), hi = std::max(hi, n);
    olo = std::min(olo, x.max_tokens), ohi = std::max(ohi, x.max_tokens);
  }
  EXPECT_GE(lo, 50);
  EXPECT_LE(hi, 150);
  EXPECT_LT(lo, 60);   // the range is actually used
  EXPECT_GT(hi, 140);
  EXPECT_GE(olo, 20);
  EXPECT_LE(ohi, 60);
  auto again = build_random_dataset({500, 100, 40, 0.5, 11});
  EXPECT_EQ(again[123].text, p[123].text);
}

TEST(Datasets, SharedPrefixPromptsShareTheirPrefix) {
  SharedPrefixConfig c;
  c.num_prompts = 12;
  c.prefix_len = 50;
  c.num_prefixes = 3;
  c.suffix_len = 10;
  c.output_len = 8;
  auto p = build_shared_prefix_dataset(c);
  ASSERT_EQ(p.size(), 12u);
  auto prefix = [](const std::string& s) {  // first 50 words
    size_t pos = 0;
    for (int i = 0; i < 50; ++i) pos = s.find(' ', pos) + 1;
    return s.substr(0, pos);
  };
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(words(p[i].text), 60);
    EXPECT_EQ(prefix(p[i].text), prefix(p[i % 3].text));
  }
  EXPECT_NE(prefix(p[0].text), prefix(p[1].text));
  EXPECT_NE(p[0].text, p[3].text);  // same prefix, different suffix
}

TEST(Datasets, JsonlPromptsMessagesAndMaxTokens) {
  std::string text =
      "{\"prompt\": \"hello world\", \"max_tokens\": 7}\n"
      "\n"
      "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\r\n";
  auto r = parse_jsonl_dataset(text, 0, 64);
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].text, "hello world");
  EXPECT_EQ((*r)[0].max_tokens, 7);
  EXPECT_TRUE((*r)[1].messages.is_array());
  EXPECT_EQ((*r)[1].max_tokens, 64);
  auto cyc = parse_jsonl_dataset(text, 5, 64);  // cycled to the requested count
  ASSERT_TRUE(cyc.ok());
  ASSERT_EQ(cyc->size(), 5u);
  EXPECT_EQ((*cyc)[4].text, "hello world");
}

TEST(Datasets, JsonlErrorsNameTheLine) {
  auto bad = parse_jsonl_dataset("{\"prompt\": \"a\"}\nnot json\n", 0, 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("line 2"), std::string::npos);
  EXPECT_FALSE(parse_jsonl_dataset("{\"text\": \"a\"}\n", 0, 8).ok());
  EXPECT_FALSE(parse_jsonl_dataset("{\"prompt\": \"a\", \"max_tokens\": 0}\n", 0, 8).ok());
  EXPECT_FALSE(parse_jsonl_dataset("{\"messages\": [{\"content\": \"x\"}]}\n", 0, 8).ok());
  EXPECT_FALSE(parse_jsonl_dataset("\n\n", 0, 8).ok());
}

TEST(Datasets, JsonlFromFile) {
  std::string path = test::temp_dir() + "/d.jsonl";
  std::ofstream(path) << "{\"prompt\": \"one two three\"}\n";
  auto r = load_jsonl_dataset(path, 0, 3);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r)[0].text, "one two three");
  EXPECT_FALSE(load_jsonl_dataset(path + ".missing", 0, 3).ok());
}

}  // namespace
}  // namespace tmill::loadgen
