// `tokenmill grammar gbnf`: the GBNF a structured-output request compiles to, or its clear error.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "test_support.h"

using namespace tmill;

namespace {
std::string bin() { return test::tokenmill_binary(); }
std::string write_temp(const std::string& name, const std::string& text) {
  std::string p = ::testing::TempDir() + name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}
}  // namespace

TEST(GrammarGbnfCli, SchemaPrintsGbnfThatCompiles) {
  std::string schema = write_temp("gbnf_cli_schema.json",
                                  R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer"}},)"
                                  R"("required":["name","n"],"additionalProperties":false})");
  auto r = test::run_command(bin() + " grammar gbnf --json-schema " + schema + " --check --repeat 3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("root ::="), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(R"("\"name\"")"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("compiled in"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("median of 3"), std::string::npos) << r.err;
}

TEST(GrammarGbnfCli, UnsupportedKeywordIsAnErrorNamingIt) {
  std::string schema = write_temp("gbnf_cli_bad.json", R"({"type":"object","dependentSchemas":{"a":{}}})");
  auto r = test::run_command(bin() + " grammar gbnf --json-schema " + schema);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("dependentSchemas"), std::string::npos) << r.err;
}

TEST(GrammarGbnfCli, RegexChoiceAndJsonObject) {
  auto re = test::run_command(bin() + " grammar gbnf --regex '[0-9]{3}-[a-z]+' --check");
  ASSERT_EQ(re.exit_code, 0) << re.err;
  EXPECT_NE(re.out.find("root ::="), std::string::npos);
  auto ch = test::run_command(bin() + " grammar gbnf --choice yes --choice no");
  ASSERT_EQ(ch.exit_code, 0) << ch.err;
  EXPECT_NE(ch.out.find(R"("yes")"), std::string::npos) << ch.out;
  EXPECT_NE(ch.out.find(R"("no")"), std::string::npos) << ch.out;
  auto obj = test::run_command(bin() + " grammar gbnf --json-object --check");
  ASSERT_EQ(obj.exit_code, 0) << obj.err;
  // Exactly one input.
  auto none = test::run_command(bin() + " grammar gbnf");
  EXPECT_EQ(none.exit_code, 2);
  auto two = test::run_command(bin() + " grammar gbnf --json-object --regex a");
  EXPECT_EQ(two.exit_code, 2);
}

// --validate says where a text leaves the grammar (exit 3), or that it is valid (exit 0).
TEST(GrammarGbnfCli, ValidateSaysWhereTextLeavesTheGrammar) {
  std::string schema = write_temp("gbnf_cli_v.json",
                                  R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},)"
                                  R"("required":["a"],"additionalProperties":false})");
  std::string good = write_temp("gbnf_cli_good.txt", R"({"a": 1, "b": "x"})");
  std::string swapped = write_temp("gbnf_cli_swapped.txt", R"({"b": "x", "a": 1})");
  std::string bad = write_temp("gbnf_cli_bad.txt", R"({"a": "1"})");
  auto ok = test::run_command(bin() + " grammar gbnf --json-schema " + schema + " --flexible-whitespace --validate " + good);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(ok.out.empty()) << ok.out;
  auto order = test::run_command(bin() + " grammar gbnf --json-schema " + schema + " --flexible-whitespace --validate " + swapped);
  EXPECT_EQ(order.exit_code, 3) << order.err;
  auto any = test::run_command(bin() + " grammar gbnf --json-schema " + schema +
                               " --flexible-whitespace --any-order --validate " + swapped);
  EXPECT_EQ(any.exit_code, 0) << any.err;
  auto r = test::run_command(bin() + " grammar gbnf --json-schema " + schema + " --flexible-whitespace --validate " + bad);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("rejected at byte 6"), std::string::npos) << r.err;
}
