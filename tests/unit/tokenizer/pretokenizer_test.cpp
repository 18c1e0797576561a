// Pre-tokenizer families: every tokenizer.ggml.pre name compiles, and the look-ahead / digit
// grouping / script rules split as the upstream regexes do.
#include <gtest/gtest.h>

#include "tokenizer/pretokenizer.h"

namespace tmill::tok {
namespace {

std::vector<std::string> split(const std::string& pre, const std::string& text) {
  auto fam = pre_family(pre);
  EXPECT_TRUE(fam.has_value()) << pre;
  if (!fam) return {};
  auto p = PreTokenizer::create(fam->regex);
  EXPECT_TRUE(p.ok()) << p.error();
  if (!p.ok()) return {};
  std::vector<Piece> pieces;
  p->split(text, pieces);
  std::vector<std::string> out;
  size_t covered = 0;
  for (const Piece& x : pieces) {
    EXPECT_EQ(x.offset, covered) << "pieces must tile the text";
    covered = x.offset + x.length;
    out.push_back(text.substr(x.offset, x.length));
  }
  EXPECT_EQ(covered, text.size());
  return out;
}

using V = std::vector<std::string>;

TEST(PreTokenizer, EveryFamilyCompilesAndTilesText) {
  const std::string sample =
      "Hello, World! It's 2024-12-31 12345678 \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80  \n\n\t end  ";
  ASSERT_GE(known_pre_names().size(), 60u);
  for (const auto& name : known_pre_names()) {
    auto pieces = split(name, sample);
    EXPECT_FALSE(pieces.empty()) << name;
  }
  for (const char* required : {"default", "gpt-2", "llama-bpe", "llama3", "qwen2", "deepseek-llm", "deepseek-coder",
                               "deepseek-v3", "falcon", "mpt", "starcoder", "refact", "command-r", "olmo", "dbrx",
                               "smaug-bpe", "poro-chat", "jais", "viking", "tekken", "smollm", "codeshell", "bloom",
                               "gpt3-finnish", "exaone", "chameleon", "minerva-7b", "gpt-4o", "superbpe", "trillion",
                               "bailingmoe", "seed-coder", "kimi-k2"})
    EXPECT_TRUE(pre_family(required).has_value()) << required;
  EXPECT_FALSE(pre_family("no-such-family").has_value());
}

TEST(PreTokenizer, Gpt2WhitespaceLookAhead) {
  // \s+(?!\S): a run of spaces leaves its last space to the following word.
  EXPECT_EQ(split("gpt-2", "a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(split("gpt-2", "a   "), (V{"a", "   "}));
  EXPECT_EQ(split("gpt-2", "x\n\ny"), (V{"x", "\n", "\n", "y"}));  // "\n" before y: not matched, own piece
  EXPECT_EQ(split("gpt-2", "it's"), (V{"it", "'s"}));
}

TEST(PreTokenizer, Llama3AndQwen2Digits) {
  EXPECT_EQ(split("llama-bpe", "1234567"), (V{"123", "456", "7"}));
  EXPECT_EQ(split("qwen2", "123"), (V{"1", "2", "3"}));
  EXPECT_EQ(split("llama-bpe", "I'LL  go\n\n x"), (V{"I", "'LL", " ", " go", "\n\n", " x"}));
}

TEST(PreTokenizer, SuperBpeGroupsDigitsFromTheRight) {
  // A zero-width look-ahead regex splits digit runs into groups of three from the right.
  EXPECT_EQ(split("superbpe", "1234567"), (V{"1", "234", "567"}));
}

TEST(PreTokenizer, DeepseekSequenceAndKimiHan) {
  EXPECT_EQ(split("deepseek-llm", "Hi\n\xE4\xB8\xAD\xE6\x96\x87"), (V{"Hi", "\n", "\xE4\xB8\xAD\xE6\x96\x87"}));
  EXPECT_EQ(split("kimi-k2", "ab\xE4\xB8\xAD\xE6\x96\x87" "cd"), (V{"ab", "\xE4\xB8\xAD\xE6\x96\x87", "cd"}));
  EXPECT_EQ(split("gpt-4o", "HelloWorld"), (V{"Hello", "World"}));
}

}  // namespace
}  // namespace tmill::tok
