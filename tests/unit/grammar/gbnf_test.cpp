// GBNF parsing and matching: accept/reject vectors and error messages.
#include <gtest/gtest.h>

#include "grammar/compiler.h"
#include "grammar/gbnf_parser.h"
#include "grammar_test_util.h"

using namespace tmill::grammar;
using namespace tmill::grammar::testing;

namespace {

std::string error_of(std::string_view gbnf) {
  auto g = compile_gbnf(gbnf, byte_vocab());
  return g.ok() ? "<compiled>" : g.error();
}

const char* kJsonGbnf = R"(# llama.cpp's json.gbnf
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";

}  // namespace

TEST(Gbnf, LiteralsAndEscapes) {
  auto g = must_compile(R"(root ::= "a\n\t\r\\\"\x41\u00e9\U0001F600")");
  EXPECT_TRUE(matches(g, "a\n\t\r\\\"A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_FALSE(matches(g, "a\n\t\r\\\"A\xC3\xA9"));
  EXPECT_TRUE(prefix_ok(g, "a\n\t\r\\\"A\xC3"));  // mid-character prefix
  EXPECT_FALSE(prefix_ok(g, "b"));
}

TEST(Gbnf, AlternationGroupingRepetition) {
  auto g = must_compile("root ::= (\"ab\" | \"c\")+ \"d\"? x{2} y{1,3} z{2,} w{,2}\n"
                        "x ::= \"x\"\ny ::= \"y\"\nz ::= \"z\"\nw ::= \"w\"\n");
  EXPECT_TRUE(matches(g, "abxxyzz"));
  EXPECT_TRUE(matches(g, "cabcdxxyyyzzzzww"));
  EXPECT_FALSE(matches(g, "xxyzz"));        // + needs one
  EXPECT_FALSE(matches(g, "abxyzz"));       // {2}
  EXPECT_FALSE(matches(g, "abxxyyyyzz"));   // {1,3}
  EXPECT_FALSE(matches(g, "abxxyz"));       // {2,}
  EXPECT_FALSE(matches(g, "abxxyzzwww"));   // {,2}
  EXPECT_FALSE(matches(g, "abddxxyzz"));    // ? at most one
}

TEST(Gbnf, CharClassesAndUtf8) {
  auto g = must_compile("root ::= [a-cé-ë中] [^a-z\\n]* .\n");
  EXPECT_TRUE(matches(g, "aZ"));
  EXPECT_TRUE(matches(g, "\xC3\xA9" "ABC\xE4\xB8\xAD"));  // é ... 中 as the final '.'
  EXPECT_TRUE(matches(g, "\xE4\xB8\xAD\xF0\x9F\x98\x80"));  // 中 then an emoji as '.'
  EXPECT_FALSE(matches(g, "dZ"));
  EXPECT_FALSE(matches(g, "\xC3\xAC" "Z"));  // ì is outside é-ë
  EXPECT_FALSE(matches(g, "aqZ"));           // q excluded by [^a-z]
  EXPECT_FALSE(matches(g, "a\nZ"));
  // Invalid UTF-8 never matches '.' or a negated class.
  EXPECT_FALSE(prefix_ok(g, "a\xFF"));
  EXPECT_FALSE(prefix_ok(g, "a\xC0\x80"));      // overlong
  EXPECT_FALSE(prefix_ok(g, "a\xED\xA0\x80"));  // surrogate
  EXPECT_FALSE(prefix_ok(g, "a\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_TRUE(prefix_ok(g, "a\xF4\x8F\xBF"));
}

TEST(Gbnf, Utf8SequencesCoverRangesExactly) {
  // Every code point in a few ranges is encoded by exactly one sequence, and nothing else is.
  for (auto [lo, hi] : std::vector<std::pair<uint32_t, uint32_t>>{{0, 0x10FFFF}, {0x7F, 0x801}, {0xFFFF, 0x10001}, {0x3A0, 0x2FFF}}) {
    auto r = gbnf::normalize({{lo, hi}});
    std::vector<std::vector<ByteRange>> seqs;
    for (auto [a, b] : r) utf8_sequences(a, b, seqs);
    uint64_t count = 0;
    for (auto& s : seqs) {
      uint64_t c = 1;
      for (auto br : s) c *= static_cast<uint64_t>(br.hi - br.lo + 1);
      count += c;
    }
    uint64_t want = 0;
    for (auto [a, b] : r) want += b - a + 1;
    EXPECT_EQ(count, want) << lo << ".." << hi;
  }
}

TEST(Gbnf, CommentsAndMultilineRules) {
  auto g = must_compile("# a comment\nroot ::= a # trailing\n  | b\n\na ::= \"a\"   # x\nb ::= (\n \"b\"\n | \"c\" )\n");
  EXPECT_TRUE(matches(g, "a"));
  EXPECT_TRUE(matches(g, "b"));
  EXPECT_TRUE(matches(g, "c"));
  EXPECT_FALSE(matches(g, "ab"));
}

TEST(Gbnf, RecursionJsonGrammar) {
  auto g = must_compile(kJsonGbnf);
  EXPECT_TRUE(matches(g, R"({"a": [1, 2.5e3, -0.1, "x\n\u00e9", true, null, {"b": {}}], "c": []})"));
  EXPECT_TRUE(matches(g, "{}"));
  EXPECT_TRUE(matches(g, "{\n  \"k\": \"\xE4\xB8\xAD\"\n}"));
  EXPECT_FALSE(matches(g, R"({"a": [1, 2,]})"));
  EXPECT_FALSE(matches(g, R"({"a": 01})"));
  EXPECT_FALSE(matches(g, R"({"a": "\q"})"));
  EXPECT_FALSE(matches(g, R"({a: 1})"));
  EXPECT_FALSE(matches(g, "{\"a\": \"x\ny\"}"));  // raw control character in a string
  EXPECT_FALSE(matches(g, R"([1])"));            // root is an object
  EXPECT_TRUE(prefix_ok(g, R"({"a": [1, {"b": "x)"));
}

TEST(Gbnf, Arithmetic) {
  auto g = must_compile(
      "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= factor ((\"*\" | \"/\") factor)*\n"
      "factor ::= num | \"(\" expr \")\"\nnum ::= [0-9]+\n");
  EXPECT_TRUE(matches(g, "1+2*(3-4)/5"));
  EXPECT_TRUE(matches(g, "((((7))))"));
  EXPECT_FALSE(matches(g, "1+"));
  EXPECT_FALSE(matches(g, "(1+2"));
  EXPECT_FALSE(matches(g, "1+2)"));
  EXPECT_FALSE(matches(g, "1++2"));
}

TEST(Gbnf, AmbiguousGrammarsStaySmall) {
  // Exponentially many parse trees, a handful of distinct stacks.
  auto g = must_compile("root ::= (a | a a | b)* \"!\"\na ::= \"x\" | \"x\" \"x\"?\nb ::= a a*\n");
  Matcher m(g);
  std::string s(3000, 'x');
  EXPECT_TRUE(m.accept_bytes(s));
  EXPECT_TRUE(m.accept_bytes("!"));
  EXPECT_TRUE(m.accepting());
}

TEST(Gbnf, LargeRepetitionCompiles) {
  auto g = must_compile("root ::= \"\\\"\" [^\"]{0,20000} \"\\\"\"\n");
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(g, "\"" + std::string(20000, 'a') + "\""));
  EXPECT_FALSE(matches(g, "\"" + std::string(20001, 'a') + "\""));
}

// fuzz_gbnf (CI smoke run): a rule whose automaton blew the budget is built again conservatively,
// and its first build had queued the rules it calls -- the queue grew under the rule being built
// (a heap use after free under ASan). The grammar compiles and matches.
TEST(Gbnf, RuleRebuiltAfterQueueingTheRulesItCalls) {
  const std::string g = "root ::= (\"-\"? ([0-9] | [1-9" + std::string(28, '\0') +
                        "] [0-9]{0,15})) (\".\" [0-9]+)? ([e0] [-+]? [0-9} [1-9]{0,15})? ws\n"
                        "ws ::= | \" \" | \"\\n\" [ \\t]ws{0,20}\n";
  auto c = compile_gbnf(g, byte_vocab());
  ASSERT_TRUE(c.ok()) << c.error();
  Matcher m(c.value());
  EXPECT_TRUE(m.accept_bytes("-12.5e0} 3 \n  "));
  EXPECT_FALSE(Matcher(c.value()).accept_bytes("-12.5x"));
}

TEST(Gbnf, Errors) {
  EXPECT_EQ(error_of("root ::= foo\n"), "grammar: 1:10: undefined rule 'foo'");
  EXPECT_EQ(error_of("start ::= \"a\"\n"), "grammar: no rule named 'root' (the start rule)");
  EXPECT_EQ(error_of("root ::= \"abc\n"), "grammar: 1:14: unterminated string literal");
  EXPECT_EQ(error_of("root ::= [a-z\n"), "grammar: 1:10: unterminated character class");
  EXPECT_EQ(error_of("root ::= (\"a\"\n"), "grammar: 1:10: expected ')' to close this group");
  EXPECT_EQ(error_of("root ::= \"a\" )\n"), "grammar: 1:14: unexpected ')'");
  EXPECT_EQ(error_of("root ::= \"\\q\"\n"), "grammar: 1:11: unknown escape '\\q'");
  EXPECT_EQ(error_of("root ::= \"a\"{3,1}\n"), "grammar: 1:13: repetition {m,n} with n < m");
  EXPECT_EQ(error_of("root ::= * \"a\"\n"), "grammar: 1:10: '*' must follow an element");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\"\n"), "grammar: 2:1: rule 'root' is defined twice");
  EXPECT_EQ(error_of("root ::= \"a\"\n  x := \"b\"\n"), "grammar: 2:5: unexpected character ':'");
  EXPECT_EQ(error_of("root\n"), "grammar: 1:5: expected '::=' after rule name 'root'");
  EXPECT_EQ(error_of("root ::= root \"a\" | \"b\"\n"),
            "grammar: left recursion in rule 'root' (it can reach itself before reading any text)");
  EXPECT_EQ(error_of("root ::= x\nx ::= y? x \"a\" | \"b\"\ny ::= \"c\"\n"),
            "grammar: left recursion in rule 'x' (it can reach itself before reading any text)");
  EXPECT_EQ(error_of("root ::= [z-a]\n"), "grammar: 1:10: character class range is reversed");
  EXPECT_EQ(error_of("root ::= \"a\"{10000000}\n"), "grammar: 1:13: repetition count too large (at most 1000000)");
  EXPECT_EQ(error_of("root ::= <think>\n"), "grammar: 1:10: token references (<...>) are not supported");
  EXPECT_EQ(error_of("root ::= \"\\uD800\"\n"), "grammar: 1:11: surrogate code point in \\u escape");
  // Right recursion and nullable rules that are not left-recursive compile.
  EXPECT_EQ(error_of("root ::= \"a\" root | \"\"\n"), "<compiled>");
  EXPECT_EQ(error_of("root ::= x x\nx ::= \"a\"?\n"), "<compiled>");
}

TEST(Gbnf, EmptyRuleAndEmptyLanguage) {
  auto g = must_compile("root ::= \n");
  Matcher m(g);
  EXPECT_TRUE(m.accepting());
  EXPECT_TRUE(m.terminated());
  EXPECT_FALSE(m.accept_bytes("a"));
}

TEST(Gbnf, EmptyClassesLeadNowhere) {
  // [^\x00-\U0010FFFF] matches nothing: "a" cannot be followed by anything, so it is refused at once
  // (by the matcher and the mask alike), while "b" still works.
  auto v = vocab_of({"", "a", "b", "ab", "bc"}, {0});
  auto g = must_compile("root ::= \"a\" [^\\x00-\\U0010FFFF] | \"b\" \"c\"?\n", v);
  Matcher m(g);
  std::vector<uint32_t> mask(1);
  m.fill_mask(mask);
  EXPECT_EQ(mask[0], (1u << 2) | (1u << 4));  // b, bc
  EXPECT_FALSE(m.accept_bytes("a"));
  EXPECT_TRUE(m.accept_bytes("b"));
}
