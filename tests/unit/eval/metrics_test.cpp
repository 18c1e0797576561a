// The task metrics and the task-file parser, directly.
#include <gtest/gtest.h>

#include "eval/tasks.h"

using namespace tmill::eval;
using nlohmann::json;

namespace {
TaskCase parse_ok(const std::string& line) {
  auto c = parse_task_case(line, 1);
  EXPECT_TRUE(c.ok()) << line << ": " << (c.ok() ? "" : c.error());
  return c.ok() ? *c : TaskCase{};
}
std::string parse_err(const std::string& line) {
  auto c = parse_task_case(line, 1);
  EXPECT_FALSE(c.ok()) << line;
  return c.ok() ? "" : c.error();
}
}  // namespace

TEST(Metrics, Exact) {
  EXPECT_TRUE(metric_exact("  Paris\n", "Paris"));
  EXPECT_TRUE(metric_exact("Paris", " Paris "));
  EXPECT_FALSE(metric_exact("Paris.", "Paris"));
  EXPECT_FALSE(metric_exact("paris", "Paris"));
  EXPECT_TRUE(metric_exact("paris", "PARIS", /*ignore_case=*/true));
  EXPECT_FALSE(metric_exact("Par is", "Paris"));  // inner whitespace matters
  EXPECT_TRUE(metric_exact("", "  "));
}

TEST(Metrics, Contains) {
  EXPECT_TRUE(metric_contains("Refunds are possible within 30 days.", "30 days"));
  EXPECT_FALSE(metric_contains("Refunds are possible within 30 Days.", "30 days"));
  EXPECT_TRUE(metric_contains("Refunds are possible within 30 Days.", "30 days", true));
  EXPECT_FALSE(metric_contains("3 0 days", "30 days"));
}

TEST(Metrics, RegexIsPcre2SearchedAnywhere) {
  EXPECT_TRUE(*metric_regex("Order #12345 shipped", R"(#\d{5}\b)"));
  EXPECT_FALSE(*metric_regex("Order #1234 shipped", R"(#\d{5}\b)"));
  EXPECT_FALSE(*metric_regex("say yes", "^yes$"));           // anchors anchor
  EXPECT_TRUE(*metric_regex("YES", "(?i)^yes$"));            // inline flags
  EXPECT_TRUE(*metric_regex("Ünïcode", R"(^\w+$)"));         // UTF + UCP: \w is Unicode
  EXPECT_TRUE(*metric_regex("ab12", R"((?<=b)\d+)"));        // PCRE lookbehind (not in ECMAScript before 2018)
  EXPECT_TRUE(*metric_regex("bad \xff byte then 42", R"(\d+)"));  // invalid UTF-8 in the answer is tolerated
  auto bad = metric_regex("x", "(unclosed");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("invalid regex"), std::string::npos);
}

TEST(Metrics, FindJsonObjects) {
  auto objs = find_json_objects("Sure! ```json\n{\"a\": 1, \"s\": \"}{\"}\n``` and {\"b\": [1, {\"c\": 2}]} {broken");
  ASSERT_EQ(objs.size(), 2u);
  EXPECT_EQ(objs[0], json::parse(R"({"a":1,"s":"}{"})"));
  EXPECT_EQ(objs[1], json::parse(R"({"b":[1,{"c":2}]})"));
  EXPECT_TRUE(find_json_objects("no json here [1,2]").empty());
  EXPECT_TRUE(find_json_objects("{'single': 'quotes'}").empty());
}

TEST(Metrics, JsonFields) {
  const json want = {{"name", "Ada Lovelace"}, {"year", 1815}};
  std::string detail;
  EXPECT_TRUE(metric_json_fields(R"({"name": "Ada Lovelace", "year": 1815, "extra": true})", want, &detail)) << detail;
  EXPECT_TRUE(metric_json_fields(R"({"year": 1815.0, "name": "Ada Lovelace"})", want));  // 1815 == 1815.0
  EXPECT_FALSE(metric_json_fields(R"({"name": "Ada Lovelace", "year": "1815"})", want, &detail));  // string != number
  EXPECT_NE(detail.find("\"year\""), std::string::npos);
  EXPECT_FALSE(metric_json_fields(R"({"name": "ada lovelace", "year": 1815})", want));
  EXPECT_FALSE(metric_json_fields(R"({"name": "Ada Lovelace"})", want, &detail));
  EXPECT_NE(detail.find("missing"), std::string::npos);
  EXPECT_FALSE(metric_json_fields("Ada Lovelace, 1815", want, &detail));
  EXPECT_EQ(detail, "no JSON object in the answer");
  // any object of the answer may satisfy it
  EXPECT_TRUE(metric_json_fields(R"(Example: {"name": "X"}. Answer: {"name": "Ada Lovelace", "year": 1815})", want));
  // dotted paths reach nested objects; a literal dotted key wins
  EXPECT_TRUE(metric_json_fields(R"({"address": {"city": "Paris"}})", json{{"address.city", "Paris"}}));
  EXPECT_TRUE(metric_json_fields(R"({"address.city": "Paris"})", json{{"address.city", "Paris"}}));
  EXPECT_TRUE(metric_json_fields(R"({"tags": ["a", "b"]})", json{{"tags", {"a", "b"}}}));
  EXPECT_FALSE(metric_json_fields(R"({"tags": ["b", "a"]})", json{{"tags", {"a", "b"}}}));
}

TEST(Metrics, ChoicePicksEarliestLabelOrOptionText) {
  const std::vector<std::string> ch = {"Paris", "London", "Berlin", "Madrid"};
  EXPECT_EQ(pick_choice("B", ch, {}), 1);
  EXPECT_EQ(pick_choice("(C)", ch, {}), 2);
  EXPECT_EQ(pick_choice("D) Madrid", ch, {}), 3);
  EXPECT_EQ(pick_choice("The answer is B.", ch, {}), 1);
  EXPECT_EQ(pick_choice("Answer: C", ch, {}), 2);
  EXPECT_EQ(pick_choice("It is london, of course", ch, {}), 1);       // option text, case-insensitive
  EXPECT_EQ(pick_choice("Berlin, not Paris", ch, {}), 2);             // earliest wins
  EXPECT_EQ(pick_choice("A capital like Madrid", ch, {}), 3);         // "A capital": prose, not label A
  EXPECT_EQ(pick_choice("I think Paris", ch, {}), 0);                 // "I" is not a label here anyway
  EXPECT_EQ(pick_choice("Parisian food", ch, {}), -1);                // word boundaries
  EXPECT_EQ(pick_choice("ABC", ch, {}), -1);
  EXPECT_EQ(pick_choice("", ch, {}), -1);
  EXPECT_EQ(pick_choice("答案：B", ch, {}), 1);                       // non-ASCII neighbours are boundaries
  // custom labels
  EXPECT_EQ(pick_choice("2", {"yes", "no"}, {"1", "2"}), 1);
  EXPECT_EQ(pick_choice("12", {"yes", "no"}, {"1", "2"}), -1);
  // expected names a label or an option text
  EXPECT_EQ(expected_choice("B", ch, {}), 1);
  EXPECT_EQ(expected_choice(" madrid ", ch, {}), 3);
  EXPECT_EQ(expected_choice("E", ch, {}), -1);
}

TEST(Metrics, StripThink) {
  EXPECT_EQ(strip_think("<think>hmm, B or C?</think>\nC"), "\nC");
  EXPECT_EQ(strip_think("reasoning in the prompt</think>C"), "C");  // template opened <think> itself
  EXPECT_EQ(strip_think("  <think>never finished"), "");
  EXPECT_EQ(strip_think("plain"), "plain");
}

TEST(Metrics, ScoreAnswerPerMetric) {
  auto exact = parse_ok(R"({"prompt": "p", "expected": ["4", "four"], "metric": "exact"})");
  EXPECT_TRUE(score_answer(exact, " four ").pass);
  EXPECT_FALSE(score_answer(exact, "4.").pass);
  auto contains = parse_ok(R"({"prompt": "p", "expected": "30 days", "metric": "contains", "ignore_case": true})");
  EXPECT_TRUE(score_answer(contains, "Within 30 DAYS").pass);
  auto regex = parse_ok(R"({"prompt": "p", "expected": "^\\s*\\d+\\s*$", "metric": "regex"})");
  EXPECT_TRUE(score_answer(regex, " 42\n").pass);
  EXPECT_FALSE(score_answer(regex, "42 apples").pass);
  auto jf = parse_ok(R"({"prompt": "p", "expected": {"qty": 3}, "metric": "json_fields"})");
  EXPECT_TRUE(score_answer(jf, R"(<think>{"qty": 2}?</think>{"qty": 3})").pass);  // think block ignored
  auto choice = parse_ok(R"({"prompt": "p", "choices": ["cat", "dog"], "expected": "dog", "metric": "choice"})");
  MetricResult r = score_answer(choice, "A");
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.detail, "picked A (cat), expected B (dog)");
  EXPECT_TRUE(score_answer(choice, "B").pass);
  EXPECT_TRUE(score_answer(choice, "a dog").pass);
}

TEST(TaskFile, ParsesFieldsAndDefaults) {
  auto c = parse_ok(R"({"id": "q1", "messages": [{"role": "user", "content": "hi"}], "expected": "x",
                        "metric": "contains", "max_tokens": 7, "stop": ["\n"]})");
  EXPECT_EQ(c.id, "q1");
  ASSERT_TRUE(c.messages.has_value());
  EXPECT_FALSE(c.prompt.has_value());
  EXPECT_EQ(c.max_tokens, 7);
  EXPECT_EQ(c.stop, std::vector<std::string>{"\n"});
  auto d = parse_task_case(R"({"prompt": "p", "expected": "x", "metric": "exact"})", 12);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->id, "line-12");
  EXPECT_EQ(d->metric, Metric::Exact);
}

TEST(TaskFile, Errors) {
  EXPECT_EQ(parse_err("{not json"), "invalid JSON");
  EXPECT_EQ(parse_err(R"(["array"])"), "each line must be a JSON object");
  EXPECT_NE(parse_err(R"({"expected": "x", "metric": "exact"})").find("exactly one of"), std::string::npos);
  EXPECT_NE(parse_err(R"({"prompt": "p", "messages": [], "expected": "x", "metric": "exact"})").find("exactly one"),
            std::string::npos);
  EXPECT_NE(parse_err(R"({"prompt": "p", "expected": "x", "metric": "fuzzy"})").find("unknown metric"), std::string::npos);
  EXPECT_NE(parse_err(R"({"prompt": "p", "metric": "exact"})").find("expected"), std::string::npos);
  EXPECT_NE(parse_err(R"({"prompt": "p", "expected": "(", "metric": "regex"})").find("invalid regex"), std::string::npos);
  EXPECT_NE(parse_err(R"({"prompt": "p", "expected": "x", "metric": "json_fields"})").find("object"), std::string::npos);
  EXPECT_NE(parse_err(R"({"prompt": "p", "expected": "C", "choices": ["a", "b"], "metric": "choice"})")
                .find("one of the labels"),
            std::string::npos);
  EXPECT_NE(parse_err(R"({"prompt": "p", "expected": "a", "choices": ["a"], "metric": "choice"})").find("two"),
            std::string::npos);
  EXPECT_NE(parse_err(R"({"prompt": "p", "expected": "x", "metric": "exact", "max_tokens": 0})").find("max_tokens"),
            std::string::npos);
  EXPECT_NE(parse_err(R"({"prompt": 3, "expected": "x", "metric": "exact"})").find("prompt"), std::string::npos);
  auto dup = parse_task_text("{\"id\":\"a\",\"prompt\":\"p\",\"expected\":\"x\",\"metric\":\"exact\"}\n\n"
                             "{\"id\":\"a\",\"prompt\":\"q\",\"expected\":\"x\",\"metric\":\"exact\"}\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error(), "line 3: duplicate id \"a\"");
  EXPECT_FALSE(parse_task_text("\n  \n").ok());
}
