// Low-level pieces of the Jinja interpreter against values Python 3 produces (hand-checked with python3).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "jinja/lexer.h"
#include "jinja/pystr.h"
#include "jinja/value.h"

namespace {

using namespace tmill::jinja;

TEST(JinjaPyStr, FloatReprMatchesPython) {
  EXPECT_EQ(py::float_repr(1.0), "1.0");
  EXPECT_EQ(py::float_repr(1e16), "1e+16");
  EXPECT_EQ(py::float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(py::float_repr(1.5e-5), "1.5e-05");
  EXPECT_EQ(py::float_repr(1e-4), "0.0001");
  EXPECT_EQ(py::float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(py::float_repr(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(py::float_repr(-0.0), "-0.0");
  EXPECT_EQ(py::float_repr(5e-324), "5e-324");
  EXPECT_EQ(py::float_repr(2.5), "2.5");
  EXPECT_EQ(py::float_repr(INFINITY), "inf");
  EXPECT_EQ(py::float_repr(-INFINITY), "-inf");
  EXPECT_EQ(py::float_repr(NAN), "nan");
}

TEST(JinjaPyStr, ReprOfStrings) {
  EXPECT_EQ(py::repr_str("abc"), "'abc'");
  EXPECT_EQ(py::repr_str("it's"), "\"it's\"");
  EXPECT_EQ(py::repr_str("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(py::repr_str("x\ny\t\\"), "'x\\ny\\t\\\\'");
  EXPECT_EQ(py::repr_str("\x01\x7f"), "'\\x01\\x7f'");
  EXPECT_EQ(py::repr_str("é你"), "'é你'");
  EXPECT_EQ(py::repr_str("\xc2\xa0"), "'\\xa0'");          // U+00A0 is not printable
  EXPECT_EQ(py::repr_str("\xe2\x80\xa8"), "'\\u2028'");    // LINE SEPARATOR
}

TEST(JinjaPyStr, SplitStripLikePython) {
  using V = std::vector<std::string>;
  EXPECT_EQ(py::split("  a b c  ", nullptr, 1, false), (V{"a", "b c  "}));
  EXPECT_EQ(py::split("  a b c  ", nullptr, 1, true), (V{"  a b", "c"}));
  std::string comma = ",";
  EXPECT_EQ(py::split("a,,b", &comma, -1, false), (V{"a", "", "b"}));
  EXPECT_EQ(py::split("a,b,c", &comma, 1, true), (V{"a,b", "c"}));
  EXPECT_EQ(py::split("", nullptr, -1, false), V{});
  EXPECT_EQ(py::split("", &comma, -1, false), V{""});
  EXPECT_EQ(py::splitlines("a\nb\r\nc\rd\n", false), (V{"a", "b", "c", "d"}));
  EXPECT_EQ(py::strip("\u3000 x \n", nullptr, true, true), "x");  // ideographic space is whitespace
  std::string chars = "ab";
  EXPECT_EQ(py::strip("abxba", &chars, false, true), "abx");
  EXPECT_EQ(py::title("hello wORLD 3rd"), "Hello World 3Rd");
  EXPECT_EQ(py::upper("straße"), "STRASSE");
  EXPECT_EQ(py::cp_len("héllo🙂"), 6u);
  EXPECT_EQ(py::replace("aaa", "a", "b", 2), "bba");
  EXPECT_EQ(py::replace("ab", "", "-", -1), "-a-b-");
}

TEST(JinjaJson, DumpsLikePythonJson) {
  Value v = from_json(nlohmann::ordered_json::parse(R"({"b": [1, 2.0, null, true], "a": {"x": "é\"\n\u0001"}, "e": []})"));
  DumpOptions opt;
  EXPECT_EQ(json_dumps(v, opt), R"({"b": [1, 2.0, null, true], "a": {"x": "é\"\n\u0001"}, "e": []})");
  opt.indent = 2;
  EXPECT_EQ(json_dumps(v, opt),
            "{\n  \"b\": [\n    1,\n    2.0,\n    null,\n    true\n  ],\n  \"a\": {\n    \"x\": \"é\\\"\\n\\u0001\"\n  },\n"
            "  \"e\": []\n}");
  DumpOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(json_dumps(Value::string("é🙂"), ascii), R"("\u00e9\ud83d\ude42")");
  DumpOptions sorted;
  sorted.sort_keys = true;
  EXPECT_EQ(json_dumps(v, sorted), R"({"a": {"x": "é\"\n\u0001"}, "b": [1, 2.0, null, true], "e": []})");
  EXPECT_THROW(json_dumps(Value::undefined(), opt), JinjaError);
}

std::vector<std::string> texts(const std::string& src) {
  std::vector<std::string> out;
  for (const auto& t : tokenize(src))
    if (t.type == Tok::Text) out.push_back(t.value);
  return out;
}

TEST(JinjaLexer, WhitespaceControl) {
  using V = std::vector<std::string>;
  // lstrip_blocks removes the indentation before a block tag; trim_blocks the newline after it.
  EXPECT_EQ(texts("a\n    {% if x %}\nb\n{% endif %}\n"), (V{"a\n", "b\n"}));
  // "-" strips all whitespace on that side, including newlines; "+" keeps the indentation.
  EXPECT_EQ(texts("a  \n  {%- if x -%}  \n  b"), (V{"a", "b"}));
  EXPECT_EQ(texts("a\n  {%+ if x %}b"), (V{"a\n  ", "b"}));
  // Not for {{ }}: no lstrip, no trim.
  EXPECT_EQ(texts("a\n  {{ x }}\nb"), (V{"a\n  ", "\nb"}));
  // Comments are blocks for lstrip/trim purposes.
  EXPECT_EQ(texts("a\n  {# c #}\nb"), (V{"a\n", "b"}));
  auto toks = tokenize("x\n\n{{ 1.5e3 + 0x1F }}");
  ASSERT_GE(toks.size(), 6u);
  EXPECT_EQ(toks[1].type, Tok::VarBegin);
  EXPECT_EQ(toks[1].line, 3);
  EXPECT_EQ(toks[2].type, Tok::Float);
  EXPECT_DOUBLE_EQ(toks[2].fval, 1500.0);
  EXPECT_EQ(toks[4].type, Tok::Int);
  EXPECT_EQ(toks[4].ival, 31);
}

}  // namespace
