// JSON Schema -> GBNF: accept/reject vectors through compile_gbnf + Matcher on a byte vocabulary,
// and compile errors that name the keyword.
#include <gtest/gtest.h>

#include <string>

#include "grammar/json_schema.h"
#include "grammar_test_util.h"

namespace tmill::grammar {
namespace {

using testing::matches;
using testing::must_compile;

std::shared_ptr<const Grammar> schema_grammar(std::string_view schema, bool flexible = false, bool any_order = false) {
  JsonOptions o;
  o.flexible_whitespace = flexible;
  o.any_order = any_order;
  auto gbnf = json_schema_text_to_gbnf(schema, o);
  EXPECT_TRUE(gbnf.ok()) << gbnf.error() << "\n" << schema;
  if (!gbnf.ok()) return nullptr;
  return must_compile(*gbnf);
}

std::string schema_error(std::string_view schema) {
  auto gbnf = json_schema_text_to_gbnf(schema);
  EXPECT_FALSE(gbnf.ok()) << schema << "\n" << (gbnf.ok() ? *gbnf : "");
  return gbnf.ok() ? "" : gbnf.error();
}

struct Vectors {
  std::vector<std::string> accept, reject;
};

void check(std::string_view schema, const Vectors& v, bool flexible = false, bool any_order = false) {
  auto g = schema_grammar(schema, flexible, any_order);
  ASSERT_TRUE(g);
  for (auto& s : v.accept) EXPECT_TRUE(matches(g, s)) << schema << " should accept " << s;
  for (auto& s : v.reject) EXPECT_FALSE(matches(g, s)) << schema << " should reject " << s;
}

TEST(JsonSchema, ScalarsAndTypeLists) {
  check(R"J({"type":"boolean"})J", {{"true", "false"}, {"null", "1", "\"true\""}});
  check(R"J({"type":["string","null"]})J", {{"null", "\"x\"", "\"\""}, {"1", "true", "[]"}});
  check(R"J({"type":"number"})J", {{"0", "-1.5", "1e-05", "1e+16", "3.25E2"}, {"01", "1.", ".5", "+1", "-"}});
  check(R"J({"type":"integer"})J", {{"0", "-12", "123456789012345678901234567890"}, {"1.0", "1e2", "-0x1"}});
  check(R"J(true)J", {{"1", "{\"a\":[null,{}]}", "\"s\""}, {"", "{", "nul"}});
}

TEST(JsonSchema, IntegerRangesAreExact) {
  check(R"J({"type":"integer","minimum":-5,"maximum":120})J",
        {{"-5", "-1", "0", "9", "10", "99", "100", "119", "120"}, {"-6", "-10", "121", "130", "200", "1000", "007", "-0"}});
  check(R"J({"type":"integer","exclusiveMinimum":0})J", {{"1", "10", "99999999999999999999"}, {"0", "-1"}});
  check(R"J({"type":"integer","minimum":1.5,"exclusiveMaximum":4})J", {{"2", "3"}, {"1", "4", "5"}});
  check(R"J({"type":"integer","minimum":98,"maximum":1002})J",
        {{"98", "99", "100", "999", "1000", "1002"}, {"97", "1003", "1010", "9"}});
  // Draft 4's boolean exclusiveMaximum.
  check(R"J({"type":"integer","maximum":10,"exclusiveMaximum":true})J", {{"9", "-3"}, {"10", "11"}});
  check(R"J({"type":"integer","minimum":100000000000000000000})J",
        {{"100000000000000000000", "100000000000000000001", "1000000000000000000000"}, {"99999999999999999999"}});
}

TEST(JsonSchema, NumberRanges) {
  check(R"J({"type":"number","exclusiveMinimum":0,"maximum":10})J",
        {{"0.5", "0.001", "1", "9.99", "10", "10.0"}, {"0", "0.0", "-0.5", "10.5", "11", "1e3"}});
  check(R"J({"type":"number","minimum":-2,"maximum":-1})J", {{"-2", "-1.5", "-1"}, {"-2.5", "-0.5", "0", "1"}});
  // Decimal bounds: the fraction is compared digit by digit at the ends.
  check(R"J({"type":"number","minimum":0.1,"maximum":2.55})J",
        {{"0.1", "0.10", "0.2", "1", "2", "2.5", "2.55", "2.549"}, {"0", "0.09", "0.099", "2.551", "2.6", "3", "-1"}});
  check(R"J({"type":"number","exclusiveMinimum":-1.5,"exclusiveMaximum":-0.25})J",
        {{"-1.4", "-1", "-0.3", "-0.26"}, {"-1.5", "-1.50", "-2", "-0.25", "-0.2", "0"}});
  check(R"J({"type":"number","minimum":1.25})J", {{"1.25", "1.3", "2", "100"}, {"1.2", "1.249", "1"}});
  check(R"J({"type":"number","minimum":-0.5})J", {{"-0.5", "-0.1", "0", "7.5"}, {"-0.51", "-1"}});
  check(R"J({"type":"number","multipleOf":0.01})J", {{"1", "1.5", "1.25", "1.250"}, {"1.255", "1e2"}});
  check(R"J({"type":"integer","multipleOf":3,"minimum":0})J", {{"0", "3", "12", "999"}, {"1", "10", "-3"}});
  check(R"J({"type":"number","multipleOf":1})J", {{"2", "40"}, {"2.5"}});
}

TEST(JsonSchema, StringsCountCodePoints) {
  check(R"J({"type":"string","minLength":2,"maxLength":3})J",
        {{"\"ab\"", "\"abc\"", "\"é\\n\"", "\"日本語\""}, {"\"a\"", "\"abcd\"", "\"日本語x\""}});
  check(R"J({"type":"string"})J", {{R"J("a\"b\\c\u0001")J", "\"\x7f\""}, {"\"a\nb\"", "\"\\x\"", "\"abc"}});
}

TEST(JsonSchema, PatternsSearchUnlessAnchored) {
  check(R"J({"type":"string","pattern":"^[a-z]+$"})J", {{"\"abc\""}, {"\"ab1\"", "\"\"", "\"1abc\""}});
  check(R"J({"type":"string","pattern":"ab"})J", {{"\"ab\"", "\"xxabyy\"", "\"ab\\n\""}, {"\"a b\"", "\"\""}});
  check(R"J({"type":"string","pattern":"^a|b$"})J", {{"\"axx\"", "\"xxb\""}, {"\"xax\"", "\"bx\""}});
  check(R"J({"type":"string","pattern":"^\\d{3}-\\d{4}$"})J", {{"\"555-1234\""}, {"\"55-1234\"", "\"555-12345\""}});
  // A quote inside the pattern is an escaped quote in the JSON text.
  check(R"J({"type":"string","pattern":"^\"[a-z]\"$"})J", {{R"J("\"a\"")J"}, {R"J(""a"")J"}});
  // minLength/maxLength beside a pattern: the repetition takes the length.
  check(R"J({"type":"string","pattern":"^[a-z]+$","maxLength":3})J", {{"\"a\"", "\"abc\""}, {"\"abcd\""}});
  check(R"J({"type":"string","pattern":"^ab","minLength":4})J", {{"\"abcd\""}, {"\"abc\"", "\"xabc\""}});
}

TEST(JsonSchema, Formats) {
  check(R"J({"type":"string","format":"date"})J",
        {{"\"2024-02-29\"", "\"2000-02-29\"", "\"2023-12-31\""},
         {"\"2023-02-29\"", "\"1900-02-29\"", "\"2023-04-31\"", "\"2023-13-01\"", "\"2023-1-01\""}});
  check(R"J({"type":"string","format":"date-time"})J",
        {{"\"2024-01-02T03:04:05Z\"", "\"2024-01-02T03:04:05.123+02:00\""}, {"\"2024-01-02 03:04:05Z\"", "\"2024-01-02T24:00:00Z\""}});
  check(R"J({"type":"string","format":"uuid"})J",
        {{"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567e89b12d3a456426614174000\""}});
  check(R"J({"type":"string","format":"ipv4"})J", {{"\"192.168.0.1\"", "\"0.0.0.0\""}, {"\"256.1.1.1\"", "\"1.2.3\"", "\"01.2.3.4\""}});
  check(R"J({"type":"string","format":"ipv6"})J", {{"\"::1\"", "\"2001:db8::8a2e:370:7334\""}, {"\"2001:db8:::1\"", "\"1::2::3\""}});
  check(R"J({"type":"string","format":"email"})J", {{"\"a.b@example.com\""}, {"\"a@\"", "\"ab.example.com\""}});
  check(R"J({"type":"string","format":"unknown-format-x"})J", {{"\"anything\""}, {"1"}});
}

TEST(JsonSchema, ObjectsInSchemaOrder) {
  const char* s = R"J({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"}},
                     "required":["b"],"additionalProperties":false})J";
  check(s, {{R"J({"b":"x"})J", R"J({"a":1,"b":"x"})J", R"J({"a":1,"b":"x","c":true})J", R"J({"b":"x","c":false})J"},
            {R"J({})J", R"J({"a":1})J", R"J({"b":"x","a":1})J", R"J({"b":"x","d":1})J", R"J({"b":"x","b":"y"})J", R"J({"a":"1","b":"x"})J"}});
}

// Checking mode: optional declared properties anywhere (a repeated one too, as parsers keep the
// last), required ones present and in the schema's order, each value under its own schema.
TEST(JsonSchema, AnyOrderPutsOptionalPropertiesAnywhere) {
  const char* s = R"J({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"boolean"},
                     "d":{"type":"null"}},"required":["b","d"],"additionalProperties":false})J";
  check(s,
        {{R"J({"b":"x","d":null})J", R"J({"c":true,"b":"x","a":1,"d":null})J", R"J({"b":"x","d":null,"a":1})J",
          R"J({"a":1,"b":"x","a":2,"d":null})J"},
         {R"J({"a":1,"d":null})J", R"J({"b":"x"})J", R"J({"b":"x","d":null,"a":"1"})J", R"J({"b":"x","d":null,"e":1})J",
          R"J({"d":null,"b":"x"})J", R"J({})J"}},
        /*flexible=*/false, /*any_order=*/true);
  // With additional properties allowed, declared names keep their schemas wherever they come.
  const char* open = R"J({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}}})J";
  check(open, {{R"J({"x":[],"b":"s","a":1})J", R"J({"b":"s","x":1,"a":2})J"}, {R"J({"x":1,"b":2,"a":1})J"}},
        /*flexible=*/true, /*any_order=*/true);
  // The same schemas in generation mode keep the schema's order.
  check(s, {{R"J({"a":1,"b":"x","c":true,"d":null})J"}, {R"J({"c":true,"b":"x","a":1,"d":null})J"}});
}

TEST(JsonSchema, AdditionalPropertiesDefaultAllowsOtherKeysOnly) {
  const char* s = R"J({"type":"object","properties":{"a":{"type":"integer"}}})J";
  // Extra keys anywhere, any value; but a declared key keeps its schema.
  check(s, {{R"J({})J", R"J({"a":1})J", R"J({"x":"y"})J", R"J({"x":1,"a":2,"y":[]})J", R"J({"ab":"s"})J", R"J({"":0})J"},
            {R"J({"a":"s"})J", R"J({"x":1,"a":"s"})J"}});
  check(R"J({"type":"object","additionalProperties":{"type":"integer"}})J", {{R"J({"k":1,"j":2})J"}, {R"J({"k":"v"})J"}});
}

TEST(JsonSchema, PropertyCounts) {
  check(R"J({"type":"object","properties":{"a":{},"b":{},"c":{}},"minProperties":2,"maxProperties":2,"additionalProperties":false})J",
        {{R"J({"a":1,"b":2})J", R"J({"a":1,"c":2})J", R"J({"b":1,"c":2})J"}, {R"J({"a":1})J", R"J({"a":1,"b":2,"c":3})J", R"J({})J"}});
  check(R"J({"type":"object","maxProperties":1})J", {{R"J({})J", R"J({"x":1})J"}, {R"J({"x":1,"y":2})J"}});
}

TEST(JsonSchema, Arrays) {
  check(R"J({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})J",
        {{"[1]", "[1,2,3]"}, {"[]", "[1,2,3,4]", "[\"a\"]"}});
  check(R"J({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})J",
        {{"[]", "[\"a\"]", "[\"a\",1]"}, {"[1]", "[\"a\",1,2]"}});
  check(R"J({"type":"array","items":[{"type":"string"}],"additionalItems":{"type":"boolean"},"minItems":2})J",
        {{"[\"a\",true]", "[\"a\",true,false]"}, {"[\"a\"]", "[\"a\",1]"}});
}

TEST(JsonSchema, EnumConstAndCombinators) {
  check(R"J({"enum":["a",1,null,{"k":[1,2]}]})J", {{"\"a\"", "1", "null", R"J({"k":[1,2]})J"}, {"\"b\"", "2", R"J({"k":[1]})J"}});
  check(R"J({"type":"string","enum":["a",1,"bb"],"maxLength":1})J", {{"\"a\""}, {"1", "\"bb\""}});
  check(R"J({"const":"x"})J", {{"\"x\""}, {"\"y\""}});
  check(R"J({"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]})J", {{"1", "\"a\""}, {"\"ab\"", "true"}});
  check(R"J({"oneOf":[{"type":"integer"},{"type":"string"}]})J", {{"1", "\"a\""}, {"null"}});
  // Discriminated objects are disjoint; without "type":"object" both would match any string.
  check(R"J({"oneOf":[{"type":"object","properties":{"t":{"const":"a"}},"required":["t"]},{"type":"object","properties":{"t":{"const":"b"},"n":{"type":"integer"}},"required":["t"]}]})J",
        {{R"J({"t":"a"})J", R"J({"t":"b","n":1})J"}, {R"J({"t":"c"})J", R"J({"t":"b","n":"x"})J"}});
  check(R"J({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                     {"properties":{"a":{"minimum":5},"b":{"type":"string"}}}]})J",
        {{R"J({"a":5})J", R"J({"a":6,"b":"x"})J"}, {R"J({"a":4})J", R"J({"b":"x"})J", R"J({"a":5,"b":1})J"}});
  check(R"J({"not":{"type":"string"}})J", {{"1", "null", "{}"}, {"\"s\""}});
  check(R"J({"type":"string","not":{"enum":["a","bc"]}})J", {{"\"b\"", "\"\"", "\"ab\"", "\"bcd\""}, {"\"a\"", "\"bc\"", "1"}});
  check(R"J({"not":{"const":"x"}})J", {{"1", "\"y\"", "\"xx\""}, {"\"x\""}});
  check(R"J({"type":"object","properties":{"a":{}},"not":{"required":["a"]}})J", {{R"J({})J", R"J({"b":1})J"}, {R"J({"a":1})J", "1"}});
}

TEST(JsonSchema, RefsIncludingRecursion) {
  const char* tree = R"J({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":false}},
      "$ref":"#/$defs/node"})J";
  check(tree, {{R"J({"v":1})J", R"J({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4}]}]})J"},
               {R"J({"v":1,"kids":[{}]})J", R"J({"v":1,"kids":[{"v":"x"}]})J"}});
  check(R"J({"definitions":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/s"}},"additionalProperties":false})J",
        {{R"J({"a":"x"})J"}, {R"J({"a":1})J"}});
  // Recursion through allOf: must not unfold forever.
  check(R"J({"definitions":{"m":{"type":"object","properties":{"c":{"type":"array","items":{"allOf":[{"$ref":"#/definitions/m"}]}}},"additionalProperties":false}},"$ref":"#/definitions/m"})J",
        {{R"J({"c":[{"c":[]}]})J"}, {R"J({"c":[1]})J"}});
}

TEST(JsonSchema, PatternProperties) {
  check(R"J({"type":"object","patternProperties":{"^x-":{"type":"integer"}},"additionalProperties":false})J",
        {{R"J({})J", R"J({"x-a":1})J"}, {R"J({"y":1})J", R"J({"x-a":"s"})J"}});
  check(R"J({"type":"object","properties":{"a":{"type":"integer"}},"patternProperties":{".*":{"minimum":0}}})J",
        {{R"J({"a":1})J", R"J({"b":2})J"}, {R"J({"a":-1})J", R"J({"b":-2})J"}});
}

TEST(JsonSchema, FlexibleWhitespaceAcceptsPythonSeparators) {
  const char* s = R"J({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array","items":{"type":"integer"}}}})J";
  check(s, {{R"J({"a": 1, "b": [1, 2]})J", "{ \"a\" :1,\n \"b\":[ ] }", R"J({"a": 3.0})J"}, {}}, /*flexible=*/true);
  check(s, {{R"J({"a":1,"b":[1,2]})J"}, {R"J({"a": 1})J", R"J({"a":3.0})J"}});
}

TEST(JsonSchema, ErrorsNameTheKeyword) {
  EXPECT_NE(schema_error(R"J({"type":"array","uniqueItems":true})J").find("'uniqueItems'"), std::string::npos);
  EXPECT_NE(schema_error(R"J({"properties":{"a":{"if":{"type":"string"},"then":{"minLength":1}}}})J").find("'if' at '/properties/a'"),
            std::string::npos);
  EXPECT_NE(schema_error(R"J({"not":{"pattern":"a"}})J").find("'not'"), std::string::npos);
  EXPECT_NE(schema_error(R"J({"$ref":"http://example.com/s.json"})J").find("'$ref'"), std::string::npos);
  EXPECT_NE(schema_error(R"J({"type":"string","format":"iri"})J").find("'format'"), std::string::npos);
  EXPECT_NE(schema_error(R"J({"oneOf":[{"type":"integer"},{"minimum":1}]})J").find("'oneOf'"), std::string::npos);
  EXPECT_NE(schema_error(R"J({"oneOf":[{"required":["a"]},{"required":["b"]}]})J").find("'oneOf'"), std::string::npos);
  EXPECT_NE(schema_error(R"J({"type":"number","multipleOf":0.3})J").find("'multipleOf'"), std::string::npos);
  EXPECT_NE(schema_error(R"J({"type":"string","pattern":"(a)\\1"})J").find("backreference"), std::string::npos);
  EXPECT_NE(schema_error(R"J({"type":"string","pattern":"a(?=b)"})J").find("lookahead"), std::string::npos);
  EXPECT_NE(schema_error(R"J({"patternProperties":{"a":{},"b":{}}})J").find("'patternProperties'"), std::string::npos);
  EXPECT_NE(schema_error(R"J({"dependentRequired":{"a":["b"]}})J").find("'dependentRequired'"), std::string::npos);
  EXPECT_NE(schema_error(R"J(false)J").find("no value"), std::string::npos);
  // Annotations and unknown keywords are not constraints.
  check(R"J({"title":"t","description":"d","examples":[1],"x-custom":{"not":1},"deprecated":true,"type":"integer"})J",
        {{"1"}, {"\"1\""}});
}

TEST(JsonSchema, PropertyOrderFollowsTheSchemaText) {
  // The ordered overload keeps "z" before "a"; json_schema_text_to_gbnf parses in order.
  auto g = schema_grammar(R"J({"properties":{"z":{},"a":{}},"required":["z","a"],"additionalProperties":false})J");
  ASSERT_TRUE(g);
  EXPECT_TRUE(matches(g, R"J({"z":1,"a":2})J"));
  EXPECT_FALSE(matches(g, R"J({"a":2,"z":1})J"));
}

TEST(JsonSchema, ObjectChoicesAndLiterals) {
  auto obj = must_compile(json_object_gbnf());
  EXPECT_TRUE(matches(obj, R"J({"a":[1,{"b":null}],"c":"d"})J"));
  EXPECT_FALSE(matches(obj, "[1]"));
  EXPECT_FALSE(matches(obj, "\"s\""));
  auto ch = must_compile(choices_to_gbnf({"yes", "no", "a\"b\\c\n"}));
  EXPECT_TRUE(matches(ch, "yes"));
  EXPECT_TRUE(matches(ch, "a\"b\\c\n"));
  EXPECT_FALSE(matches(ch, "ye"));
  EXPECT_FALSE(matches(ch, "maybe"));
  auto lit = must_compile("root ::= " + gbnf_literal("\x01\t\"\\é") + "\n");
  EXPECT_TRUE(matches(lit, "\x01\t\"\\é"));
  EXPECT_FALSE(matches(lit, "\x01\t\"\\e"));
}

}  // namespace
}  // namespace tmill::grammar
