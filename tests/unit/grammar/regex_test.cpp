// regex_to_gbnf: the whole text matches the pattern; accept/reject vectors and refused constructs.
#include <gtest/gtest.h>

#include <string>

#include "grammar/json_schema.h"
#include "grammar_test_util.h"

namespace tmill::grammar {
namespace {

using testing::matches;
using testing::must_compile;

void check(std::string_view pattern, std::vector<std::string> accept, std::vector<std::string> reject) {
  auto gbnf = regex_to_gbnf(pattern);
  ASSERT_TRUE(gbnf.ok()) << pattern << ": " << gbnf.error();
  auto g = must_compile(*gbnf);
  ASSERT_TRUE(g);
  for (auto& s : accept) EXPECT_TRUE(matches(g, s)) << pattern << " should accept '" << s << "'\n" << *gbnf;
  for (auto& s : reject) EXPECT_FALSE(matches(g, s)) << pattern << " should reject '" << s << "'\n" << *gbnf;
}

std::string regex_error(std::string_view pattern) {
  auto gbnf = regex_to_gbnf(pattern);
  EXPECT_FALSE(gbnf.ok()) << pattern;
  return gbnf.ok() ? "" : gbnf.error();
}

TEST(Regex, ClassesAndEscapes) {
  check("[a-c]x", {"ax", "cx"}, {"dx", "a", "axx"});
  check("[^0-9]", {"a", "é", " "}, {"5", "", "ab"});
  check(R"J(\d\w\s)J", {"1a ", "9_\t"}, {"a1 ", "11x"});
  check(R"J(\D\W\S)J", {"a-x"}, {"1-x", "aax", "a- "});
  check(R"J([\d.-]+)J", {"1.5", "-2", "..."}, {"a", ""});
  check(R"J(\.\*\\\/\x41\u00e9\n)J", {".*\\/Aé\n"}, {".*\\/Ae\n"});
  check("a.c", {"abc", "a-c", "aéc"}, {"a\nc", "a\rc", "ac"});
  // Flavours disagree beyond ASCII (Python's \w has é, ECMAScript's does not): never looser than any.
  check(R"J(\w\W[^\w]\S)J", {"a--x"}, {"é--x", "aé-x", "a-éx", "a--\u0085"});
  check(R"J([\]\-])J", {"]", "-"}, {"a"});
}

TEST(Regex, GroupsAlternationQuantifiers) {
  check("(ab|cd)+", {"ab", "abcd", "cdcdab"}, {"", "abc", "ac"});
  check("(?:x|y)?z", {"z", "xz", "yz"}, {"xyz", "x"});
  check("(?<year>\\d{4})-(?P<m>\\d\\d)", {"2024-01"}, {"24-01", "2024-1"});
  check("a{2}b{1,3}c{2,}", {"aabcc", "aabbbccc"}, {"abcc", "aabbbbcc", "aabc"});
  check("a*?b+?c??", {"b", "aabbc"}, {"", "ac"});
  check("x{0}y", {"y"}, {"xy"});
  check("a{,3}", {"a{,3}"}, {"aaa"});  // not a quantifier: literal braces
  check("^(foo|bar)$", {"foo", "bar"}, {"foobar", ""});
}

// Bytes that are not UTF-8 (here a 4-byte lead decoding past U+10FFFF, an overlong form, a lone
// surrogate) stand for themselves as Latin-1 code points, so the GBNF is always valid UTF-8 and compiles.
TEST(Regex, InvalidUtf8InThePatternStillCompiles) {
  check("a\xF5\x89\x89\x89", {"a\u00f5\u0089\u0089\u0089"}, {"a", "a\xF5\x89\x89\x89"});
  check("\xC0\x80", {"\u00c0\u0080"}, {"\u00c0"});
  check("\xED\xA0\x80", {"\u00ed\u00a0\u0080"}, {"\u00ed"});
}

TEST(Regex, RefusedConstructsAreErrors) {
  EXPECT_NE(regex_error("(a)\\1").find("backreference"), std::string::npos);
  EXPECT_NE(regex_error("a(?=b)").find("lookahead"), std::string::npos);
  EXPECT_NE(regex_error("(?<!a)b").find("lookbehind"), std::string::npos);
  EXPECT_NE(regex_error("\\bword\\b").find("word boundary"), std::string::npos);
  EXPECT_NE(regex_error("(?i)abc").find("flags"), std::string::npos);
  EXPECT_NE(regex_error("\\p{L}").find("\\p"), std::string::npos);
  EXPECT_NE(regex_error("a**").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(regex_error("(ab").find("')'"), std::string::npos);
  EXPECT_NE(regex_error("a{3,1}").find("m > n"), std::string::npos);
  EXPECT_NE(regex_error("a^b").find("anchor"), std::string::npos);
}

}  // namespace
}  // namespace tmill::grammar
