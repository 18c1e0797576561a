// Matcher: masks against the brute-force reference, EOS, forced bytes, copies, caches.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <thread>
#include <atomic>

#include "grammar/compiler.h"
#include "grammar/internal.h"
#include "grammar/json_schema.h"
#include "grammar_test_util.h"

using namespace tmill;
using namespace tmill::grammar;
using namespace tmill::grammar::testing;

namespace {

// Tokens that span terminals and split UTF-8 characters: é = C3 A9, 中 = E4 B8 AD.
std::vector<std::string> mixed_tokens() {
  std::vector<std::string> t = {"", "a", "b", "c", "ab", "abc", "ba", "\"", "\",", "\":", "{\"", "\"}", "}",
                                "{", "[", "]", ",", ":", " ", "  ", "\n", "1", "12", "0", ".", "-", "e",
                                "1.5", "true", "tr", "ue", "null", "\\", "\\n", "\\u", "00", "e9", "\xC3",
                                "\xA9", "\xC3\xA9", "a\xC3", "\xA9\"", "\xE4", "\xB8\xAD", "\xE4\xB8", "\xAD\"",
                                "\xE4\xB8\xAD", "\"a\"", "\": \"", "\", \"", "x", "xy", "+", "*", "(", ")", "((",
                                "))", "1+", "+2", "\x7F", "\x01", "\xFF", "\xC0\x80", "\xF0\x9F\x98\x80",
                                // longer than kShortTokenBytes: classified per grammar state
                                "aaaaaaaaaaaaaaaaaaaa", "\"}, {\"abc\": [1, 2, 3]}", "ababababababababab\"", "(((((((((1)))))))))"};
  return t;  // token 0 is the EOS (no bytes)
}

void expect_masks_match(Matcher& m, const std::string& context) {
  auto want = brute_mask(m);
  auto got = fast_mask(m);
  ASSERT_EQ(want, got) << context << ":" << mask_diff(m.grammar().vocab(), want, got);
}

// Random walk: at each step the mask must equal the reference; then take a random allowed token.
void random_walks(const std::shared_ptr<const Grammar>& g, int walks, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int w = 0; w < walks; ++w) {
    Matcher m(g);
    std::string text;
    for (int s = 0; s < steps; ++s) {
      expect_masks_match(m, "after '" + text + "'");
      if (::testing::Test::HasFatalFailure()) return;
      auto mask = brute_mask(m);
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < g->vocab().size(); ++t) {
        if (mask_has(mask, t)) allowed.push_back(t);
      }
      if (allowed.empty()) break;
      int32_t t = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_token(t));
      if (m.terminated()) break;
      text += g->vocab().token_bytes(t);
    }
  }
}

const char* kJson = R"(root ::= object
value ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

}  // namespace

TEST(Matcher, MasksMatchReferenceOnJson) {
  auto v = vocab_of(mixed_tokens(), {0});
  auto g = must_compile(kJson, v);
  random_walks(g, 30, 40, 1);
}

TEST(Matcher, MasksMatchReferenceOnArithmetic) {
  auto v = vocab_of(mixed_tokens(), {0});
  auto g = must_compile("root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= f ((\"*\" | \"/\") f)*\n"
                        "f ::= [0-9]+ | \"(\" expr \")\"\n",
                        v);
  random_walks(g, 30, 30, 2);
}

TEST(Matcher, MasksMatchReferenceOnUtf8Classes) {
  auto v = vocab_of(mixed_tokens(), {0});
  auto g = must_compile("root ::= \"\\\"\" [^\"a]{0,5} [é中]* \"\\\"\" \",\"?\n", v);
  random_walks(g, 30, 12, 3);
}

// Random grammars over a small alphabet, random vocabularies of byte strings from it.
TEST(Matcher, MasksMatchReferenceOnRandomGrammars) {
  std::mt19937 rng(7);
  const std::vector<std::string> atoms = {"\"a\"", "\"b\"", "\"ab\"", "[a-c]", "[^a]", "\"é\"", "[é-ê]", ".", "\"\""};
  const std::vector<std::string> pieces = {"a", "b", "c", "\xC3", "\xA9", "\xC3\xA9", "\xAA", "z"};
  int compiled = 0;
  for (int iter = 0; iter < 150; ++iter) {
    int nrules = 1 + static_cast<int>(rng() % 3);
    std::string g;
    std::function<std::string(int)> expr = [&](int depth) -> std::string {
      int k = static_cast<int>(rng() % (depth > 2 ? 2 : 6));
      if (k == 0) return atoms[rng() % atoms.size()];
      if (k == 1) return "r" + std::to_string(rng() % static_cast<unsigned>(nrules));
      if (k == 2) return expr(depth + 1) + " " + expr(depth + 1);
      if (k == 3) return "(" + expr(depth + 1) + " | " + expr(depth + 1) + ")";
      // Small bounds only: counted repetitions inside loops of grammars this ambiguous make
      // exponentially many distinct stacks (as unrolling would); CountedRepetitions tests them.
      static const char* ops[] = {"*", "+", "?", "{2}", "{1,3}", "{2,}"};
      return "(" + expr(depth + 1) + ")" + ops[rng() % 6];
    };
    g += "root ::= r0\n";
    for (int r = 0; r < nrules; ++r) g += "r" + std::to_string(r) + " ::= \"" + pieces[rng() % 3] + "\" " + expr(0) + " | " + expr(0) + "\n";
    auto gr = compile_gbnf(g, nullptr);
    if (!gr.ok()) {  // left recursion and the like
      EXPECT_TRUE(gr.error().find("left recursion") != std::string::npos ||
                  gr.error().find("can match the empty string") != std::string::npos)
          << gr.error();
      continue;
    }
    std::vector<std::string> toks = {""};
    for (int i = 0; i < 40; ++i) {
      std::string t;
      int len = 1 + static_cast<int>(rng() % 4);
      for (int j = 0; j < len; ++j) t += pieces[rng() % pieces.size()];
      toks.push_back(t);
    }
    auto v = vocab_of(toks, {0});
    auto gg = compile_gbnf(g, v);
    ASSERT_TRUE(gg.ok()) << gg.error();
    ++compiled;
    SCOPED_TRACE(g);
    random_walks(gg.value(), 3, 10, static_cast<uint32_t>(iter));
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(compiled, 30);
}

TEST(Matcher, EosAllowedExactlyWhenAccepting) {
  auto v = vocab_of({"", "a", "b", "ab"}, {0});
  auto g = must_compile("root ::= \"a\" \"b\"?\n", v);
  Matcher m(g);
  auto mask = fast_mask(m);
  EXPECT_FALSE(mask_has(mask, 0));
  EXPECT_TRUE(mask_has(mask, 1));
  EXPECT_TRUE(mask_has(mask, 3));
  EXPECT_FALSE(mask_has(mask, 2));
  EXPECT_FALSE(m.accept_token(0));
  ASSERT_TRUE(m.accept_token(1));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.terminated());
  mask = fast_mask(m);
  EXPECT_TRUE(mask_has(mask, 0));
  EXPECT_TRUE(mask_has(mask, 2));
  EXPECT_FALSE(mask_has(mask, 1));
  ASSERT_TRUE(m.accept_token(2));
  EXPECT_TRUE(m.terminated());
  mask = fast_mask(m);
  EXPECT_EQ(mask, std::vector<uint32_t>({1u}));  // only EOS
  ASSERT_TRUE(m.accept_token(0));
  EXPECT_TRUE(m.terminated());
  EXPECT_FALSE(m.accept_token(0));
  EXPECT_EQ(fast_mask(m), std::vector<uint32_t>({0u}));
}

TEST(Matcher, RejectionLeavesStateUnchanged) {
  auto g = must_compile("root ::= \"abc\" | \"abd\"\n");
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("ab"));
  EXPECT_FALSE(m.accept_bytes("ce"));  // 'c' fits, 'e' does not: nothing consumed
  EXPECT_FALSE(m.accept_token(256));   // EOS while not accepting
  EXPECT_TRUE(m.accept_bytes("d"));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.accept_bytes("x"));
  EXPECT_TRUE(m.accepting());
}

TEST(Matcher, ForcedBytes) {
  auto g = must_compile("root ::= \"{\\\"name\\\": \\\"\" [a-z]+ \"\\\"}\" | \"{\\\"nope\\\"}\"\n");
  Matcher m(g);
  EXPECT_EQ(m.forced_bytes(), "{\"n");
  EXPECT_EQ(m.forced_bytes(2), "{\"");
  ASSERT_TRUE(m.accept_bytes("{\"na"));
  EXPECT_EQ(m.forced_bytes(), "me\": \"");
  ASSERT_TRUE(m.accept_bytes("me\": \"x"));
  EXPECT_EQ(m.forced_bytes(), "");  // [a-z] or '"'
  ASSERT_TRUE(m.accept_bytes("\""));
  EXPECT_EQ(m.forced_bytes(), "}");
  ASSERT_TRUE(m.accept_bytes("}"));
  EXPECT_EQ(m.forced_bytes(), "");  // accepting: the end may come now
  EXPECT_TRUE(m.terminated());
}

TEST(Matcher, CopiesAreIndependent) {
  auto g = must_compile("root ::= \"a\" (\"b\" | \"c\") \"d\"\n");
  Matcher a(g);
  ASSERT_TRUE(a.accept_bytes("a"));
  Matcher b(a);
  ASSERT_TRUE(a.accept_bytes("b"));
  ASSERT_TRUE(b.accept_bytes("c"));
  EXPECT_FALSE(a.accept_bytes("c"));
  EXPECT_FALSE(b.accept_bytes("b"));
  Matcher c(g);
  c = b;
  ASSERT_TRUE(c.accept_bytes("d"));
  EXPECT_TRUE(c.accepting());
  EXPECT_FALSE(b.accepting());
  Matcher d(std::move(c));
  EXPECT_TRUE(d.accepting());
  EXPECT_EQ(fast_mask(d), brute_mask(d));
}

TEST(Matcher, LongGenerationKeepsWorking) {
  // Thousands of bytes through a recursive grammar: the stack pool is compacted along the way.
  auto g = must_compile(kJson);
  Matcher m(g);
  ASSERT_TRUE(m.accept_bytes("{\"a\": ["));
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(m.accept_bytes("{\"k\": [1, \"x\"]}, ")) << i;
  ASSERT_TRUE(m.accept_bytes("2]}"));
  EXPECT_TRUE(m.accepting());
}

TEST(GrammarCache, CachesGrammarsAndErrors) {
  auto v = byte_vocab();
  GrammarCache cache(v, 2);
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::Grammar;
  c.text = "root ::= \"x\"\n";
  auto a = cache.get(c);
  auto b = cache.get(c);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value().get(), b.value().get());
  OutputConstraint bad = c;
  bad.text = "root ::= nope\n";
  auto e1 = cache.get(bad);
  ASSERT_FALSE(e1.ok());
  EXPECT_EQ(e1.error(), "grammar: 1:10: undefined rule 'nope'");
  EXPECT_FALSE(cache.get(bad).ok());
  // Options are part of the key.
  OutputConstraint c2 = c;
  c2.flexible_whitespace = true;
  auto d = cache.get(c2);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(d.value().get(), a.value().get());
  // Capacity 2: the first entry was evicted, a new compile gives a new grammar.
  EXPECT_NE(cache.get(c).value().get(), a.value().get());
}

TEST(GrammarCache, ChoiceConstraint) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::Choice;
  c.choices = {"yes", "no", "maybe \"so\""};
  auto g = compile(c, byte_vocab());
  if (!g.ok() && choices_to_gbnf({"x"}).empty()) GTEST_SKIP() << "choices_to_gbnf not landed yet";
  ASSERT_TRUE(g.ok()) << g.error();
  EXPECT_TRUE(matches(g.value(), "yes"));
  EXPECT_TRUE(matches(g.value(), "maybe \"so\""));
  EXPECT_FALSE(matches(g.value(), "ye"));
  EXPECT_FALSE(matches(g.value(), "yesno"));
  c.choices.clear();
  EXPECT_FALSE(compile(c, byte_vocab()).ok());
}

TEST(Matcher, CountedRepetitionsMatchReference) {
  // Bounds above the unrolling limit are counted on the stack; masks must stay exact, including
  // near the bounds, for bodies with multi-byte characters and escapes.
  auto v = vocab_of(mixed_tokens(), {0});
  for (const char* g : {"root ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [n\"]){2,60} \"\\\"\" \",\"?\n",
                        "root ::= \"[\" ([a-c] | \"é\"){50,} \"]\"\n",
                        "root ::= item{0,100}\nitem ::= \"ab\" | \"c\" | \"1+\"\n",
                        "root ::= (\"(\" root \")\"){0,70} \"x\"?\n"}) {
    SCOPED_TRACE(g);
    CompileLimits counted;  // short bodies are unrolled by default
    counted.max_unrolled_states = 0;
    auto compiled = compile_gbnf(g, v, "root", counted);
    ASSERT_TRUE(compiled.ok()) << compiled.error();
    auto gr = compiled.value();
    EXPECT_GT(gr->impl().prog.repeats.size(), 0u);
    random_walks(gr, 6, 70, 11);
  }
}

// Optional counted classes that overlap made the subset construction explode (fuzz_gbnf: 116 NFA
// states, 131,096 DFA states, 1.5 s); past its budget the rule is rebuilt with the repetitions
// counted on the stack, and matches and masks stay exact.
TEST(Matcher, ExplodingRuleIsRebuiltWithCountedRepetitions) {
  const char* g =
      "root ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([e0] [-+]? [0-9} [1-9]{0,15})? ws\n"
      "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
  auto v = vocab_of(mixed_tokens(), {0});
  auto gr = must_compile(g, v);
  ASSERT_TRUE(gr);
  EXPECT_GT(gr->impl().prog.repeats.size(), 0u);
  EXPECT_LT(gr->impl().prog.num_states(), 2000);
  EXPECT_TRUE(matches(gr, "-12.5e+1} 9\n\t\t"));
  EXPECT_TRUE(matches(gr, "7"));
  EXPECT_TRUE(matches(gr, std::string(16, '1')));
  EXPECT_FALSE(matches(gr, std::string(17, '1')));  // [1-9] and 16 more digits: one too many (no 0 or e
                                                     // to start an exponent)
  EXPECT_FALSE(matches(gr, "1e+" + std::string(17, '5')));
  random_walks(gr, 10, 30, 5);
}

// A regular language whose automaton explodes even when built conservatively (fuzz_json_schema: a
// loop of a group of many '.') is refused with a clear error instead of taking seconds and gigabytes.
TEST(Gbnf, ExplodingAutomatonIsAClearError) {
  auto gbnf = regex_to_gbnf("^(  fitems*.......................................uT..)*");
  ASSERT_TRUE(gbnf.ok()) << gbnf.error();
  auto g = compile_gbnf(*gbnf, byte_vocab());
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().find("too complex to compile"), std::string::npos) << g.error();
}

TEST(Gbnf, CountedRepetitionBounds) {
  CompileLimits counted;
  counted.max_unrolled_states = 0;
  for (const CompileLimits& lim : {CompileLimits{}, counted}) {  // unrolled, then counted on the stack
    auto compiled = compile_gbnf("root ::= \"<\" [a-z]{3,100} \">\" [0-9]{60,}\n", byte_vocab(), "root", lim);
    ASSERT_TRUE(compiled.ok()) << compiled.error();
    auto g = compiled.value();
    EXPECT_EQ(g->impl().prog.repeats.size(), lim.max_unrolled_states == 0 ? 2u : 0u);
    EXPECT_TRUE(matches(g, "<abc>" + std::string(60, '1')));
    EXPECT_TRUE(matches(g, "<" + std::string(100, 'q') + ">" + std::string(200, '7')));
    EXPECT_FALSE(matches(g, "<ab>" + std::string(60, '1')));
    EXPECT_FALSE(matches(g, "<" + std::string(101, 'q') + ">" + std::string(60, '7')));
    EXPECT_FALSE(matches(g, "<abc>" + std::string(59, '1')));
  }
  // Counted on the stack (too many copies to unroll), a body that can match the empty string is
  // refused; a short one is unrolled, and works.
  EXPECT_EQ(compile_gbnf("root ::= (\"a\"?){0,5000}\n", byte_vocab()).error(),
            "grammar: repetition root{0,5000} of an expression that can match the empty string is not supported");
  auto small = must_compile("root ::= (\"a\"?){0,100}\n");
  ASSERT_TRUE(small);
  EXPECT_TRUE(matches(small, std::string(100, 'a')));
  EXPECT_TRUE(matches(small, ""));
  EXPECT_FALSE(matches(small, std::string(101, 'a')));
}

TEST(Matcher, CountedRepetitionNearBounds) {
  // Long tokens cross the minimum and the maximum of a counted repetition and leave it mid-token.
  auto v = vocab_of({"", "<", "a", "aa", "aaa", "aaaaaaa", "aaaaaaaaaaaaaaaaa", "a>", "aa>,", ">", ",", "<a", "b",
                     "ab", "ba", "bab>"},
                    {0});
  for (const char* g : {"root ::= \"<\" \"a\"{50,70} \">\" \",\"?\n", "root ::= \"<\" [ab]{49,} \">\"\n",
                        "root ::= \"<\" (\"a\" | \"ba\"){0,55}\n"}) {
    SCOPED_TRACE(g);
    auto gr = must_compile(g, v);
    ASSERT_TRUE(gr);
    random_walks(gr, 12, 120, 5);
  }
}

TEST(Matcher, SharedVocabularyAcrossThreadsAndGrammars) {
  // Matchers of two grammars that share rules fill masks on four threads at once from a cold
  // cache: every mask must equal the exact walk, and the shared rule's entries are reused.
  auto v = vocab_of(mixed_tokens(), {0});
  auto g1 = must_compile(kJson, v);
  auto g2 = must_compile(std::string(kJson) + "extra ::= \"never used\"\n", v);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      for (int w = 0; w < 20; ++w) {
        Matcher m(t % 2 ? g1 : g2);
        for (int s = 0; s < 30; ++s) {
          std::vector<uint32_t> fast(Matcher::mask_words(v->size())), ref(fast.size());
          m.fill_mask(fast);
          m.fill_mask_reference(ref);
          if (fast != ref) ++bad;
          std::vector<int32_t> allowed;
          for (int32_t k = 0; k < v->size(); ++k) {
            if (mask_has(fast, k)) allowed.push_back(k);
          }
          if (allowed.empty() || !m.accept_token(allowed[rng() % allowed.size()]) || m.terminated()) break;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  // The second grammar found the first one's entries: the cache holds one set, not two.
  size_t entries = v->impl().cache->size();
  Matcher a(g1), b(g2);
  std::vector<uint32_t> mask(Matcher::mask_words(v->size()));
  a.fill_mask(mask);
  b.fill_mask(mask);
  EXPECT_EQ(v->impl().cache->size(), entries);
}
