// run_tasks on the real stories260K model through the Engine: the answers are its greedy
// continuations, pinned once in tests/data/eval/stories_tasks.jsonl (and equal to `generate`'s);
// every metric passes and fails where the pinned answers say. Reports built from the runs.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine.h"
#include "eval/task_report.h"
#include "eval/task_runner.h"
#include "eval_models.h"

using namespace tmill;
using namespace tmill::eval;

namespace {

std::unique_ptr<Engine> engine(const std::string& model, const std::string& kv = "auto") {
  EngineConfig c;
  c.model_path = model;
  c.threads = 2;
  c.kv_cache_bytes = 8ull << 20;
  c.kv_cache_dtype = kv;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.error();
  return std::move(e).value();
}

std::vector<TaskCase> stories_cases() {
  auto c = parse_task_file(test::source_path("tests/data/eval/stories_tasks.jsonl"));
  EXPECT_TRUE(c.ok()) << c.error();
  return *c;
}

}  // namespace

TEST(Tasks, Stories260KPinnedAnswersAndVerdicts) {
  const auto cases = stories_cases();
  auto e = engine(test::stories_path());
  auto run = run_tasks(*e, cases, {});
  ASSERT_TRUE(run.ok()) << run.error();
  ASSERT_EQ(run->cases.size(), cases.size());
  std::map<std::string, const CaseResult*> by_id;
  for (const auto& c : run->cases) by_id[c.id] = &c;
  // the greedy continuations (determined once with `tokenmill generate --temperature 0`)
  EXPECT_EQ(by_id["exact-pass"]->answer, ", there was a little girl named Lily");
  EXPECT_EQ(by_id["exact-pass"]->finish_reason, "stop");
  EXPECT_EQ(by_id["contains-pass"]->answer,
            " with her mom. She saw a big box with a big box. She wanted to play with");
  EXPECT_EQ(by_id["contains-pass"]->finish_reason, "length");
  EXPECT_EQ(by_id["contains-pass"]->completion_tokens, 24);
  EXPECT_EQ(by_id["regex-pass"]->answer, " named Max went to the park with his mom. They");
  EXPECT_EQ(by_id["choice-pass"]->answer, " Lily. She loved to");
  EXPECT_EQ(by_id["json-fail"]->answer, " were playing in the park. They liked to play with their toy");
  EXPECT_EQ(by_id["chat"]->answer, "\"Here?\" Annab");  // ChatML text is foreign to this model
  const std::map<std::string, bool> verdict = {
      {"exact-pass", true},    {"exact-fail", false},  {"contains-pass", true}, {"contains-fail", false},
      {"contains-ignore-case", true}, {"regex-pass", true}, {"regex-fail", false}, {"choice-pass", true},
      {"choice-fail", false},  {"json-fail", false},   {"chat", true}};
  for (const auto& [id, pass] : verdict) EXPECT_EQ(by_id.at(id)->pass, pass) << id << ": " << by_id.at(id)->detail;
  EXPECT_EQ(by_id["choice-fail"]->detail, "picked no option, expected A (Sue)");
  EXPECT_EQ(by_id["json-fail"]->detail, "no JSON object in the answer");
  EXPECT_EQ(run->passed, 6);
  EXPECT_NEAR(run->accuracy, 6.0 / 11.0, 1e-12);
  EXPECT_EQ(run->chat_template, "chatml fallback");  // stories260K ships no chat template
  EXPECT_NE(by_id["chat"]->prompt_text.find("<|im_start|>user\nTell me a story.<|im_end|>"), std::string::npos);
  // timings
  int64_t completion = 0;
  for (const auto& c : run->cases) {
    EXPECT_TRUE(c.error.empty()) << c.error;
    EXPECT_GT(c.latency_s, 0.0);
    EXPECT_LE(c.ttft_s, c.latency_s);
    completion += c.completion_tokens;
  }
  EXPECT_EQ(run->completion_tokens, completion);
  EXPECT_GT(run->tokens_per_s, 0.0);
  EXPECT_LE(run->latency_s.median, run->latency_s.p95);
  EXPECT_EQ(run->latency_s.n, 11);
}

// All cases batched give the same answers as each case alone (greedy, continuous batching).
TEST(Tasks, BatchedAnswersEqualSingleCaseRuns) {
  const auto cases = stories_cases();
  auto e = engine(test::stories_path());
  auto all = run_tasks(*e, cases, {});
  ASSERT_TRUE(all.ok());
  for (size_t i = 0; i < cases.size(); i += 3) {
    auto one = run_tasks(*e, {cases[i]}, {});
    ASSERT_TRUE(one.ok());
    EXPECT_EQ(one->cases[0].answer, all->cases[i].answer) << cases[i].id;
  }
}

TEST(Tasks, DefaultMaxTokensAndTooLongPrompts) {
  auto cases = parse_task_text(R"({"id": "a", "prompt": "Tom and Sue", "expected": "x", "metric": "contains"})");
  ASSERT_TRUE(cases.ok());
  EngineConfig c;
  c.model_path = test::stories_path();
  c.threads = 2;
  c.max_model_len = 16;
  auto e = Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.error();
  TaskRunOptions o;
  o.default_max_tokens = 5;
  auto r = run_tasks(**e, *cases, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->cases[0].completion_tokens, 5);
  std::string long_prompt;
  for (int i = 0; i < 20; ++i) long_prompt += "Tom and Sue ";
  auto lc = parse_task_text(R"({"prompt": ")" + long_prompt + R"(", "expected": "x", "metric": "contains"})");
  ASSERT_TRUE(lc.ok());
  auto lr = run_tasks(**e, *lc, o);
  ASSERT_TRUE(lr.ok());
  EXPECT_FALSE(lr->cases[0].pass);
  EXPECT_NE(lr->cases[0].error.find("does not fit max_model_len 16"), std::string::npos);
  EXPECT_EQ(lr->passed, 0);
}

TEST(TaskReport, TwoModelsSideBySide) {
  const auto cases = stories_cases();
  TaskReport rep;
  rep.tasks_file = "stories_tasks.jsonl";
  rep.cases = cases;
  auto e1 = engine(test::stories_path(), "f32");
  auto r1 = run_tasks(*e1, cases, {});
  ASSERT_TRUE(r1.ok());
  rep.runs.push_back(*r1);
  rep.runs.push_back(*r1);
  rep.runs[1].model_name = "copy <b>&";
  rep.runs[1].model = "/some/dir/copy.gguf";
  // a second model that answers one case differently
  rep.runs[1].cases[2].answer = "something else";
  rep.runs[1].cases[2].pass = false;
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(case_differs(rep, i), i == 2) << i;

  EXPECT_EQ(display_names(rep), (std::vector<std::string>{"stories260K", "copy <b>&"}));
  TaskReport same = rep;
  same.runs[1] = same.runs[0];
  EXPECT_EQ(display_names(same), (std::vector<std::string>{"stories260K (stories260K.gguf) #1", "stories260K (stories260K.gguf) #2"}));
  same.runs[1].model = "/other/q4.gguf";
  EXPECT_EQ(display_names(same), (std::vector<std::string>{"stories260K (stories260K.gguf)", "stories260K (q4.gguf)"}));
  rep.runs[1].cases[5].answer = "has a `backtick`";  // still "passes": only the report formatting is checked

  const auto j = report_json(rep);
  EXPECT_EQ(j["cases"], cases.size());
  ASSERT_EQ(j["models"].size(), 2u);
  EXPECT_EQ(j["models"][0]["passed"], 6);
  EXPECT_EQ(j["models"][0]["total"], 11);
  EXPECT_TRUE(j["models"][0]["latency_s"].contains("p95"));
  EXPECT_EQ(j["per_case"][2]["differs"], true);
  EXPECT_EQ(j["per_case"][2]["results"][1]["answer"], "something else");
  EXPECT_EQ(j["per_case"][0]["differs"], false);

  const std::string md = report_markdown(rep);
  EXPECT_NE(md.find("| stories260K | 54.5% | 6/11 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| contains-pass | contains | big box | PASS ` with her mom."), std::string::npos) << md;
  EXPECT_NE(md.find("FAIL `something else` | ≠ |"), std::string::npos) << md;
  EXPECT_NE(md.find("PASS `` has a `backtick` `` |"), std::string::npos) << md;

  const std::string html = report_html(rep);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Accuracy per model"), std::string::npos);
  EXPECT_NE(html.find("copy &lt;b&gt;&amp;"), std::string::npos);  // escaped
  EXPECT_EQ(html.find("copy <b>"), std::string::npos);
  EXPECT_NE(html.find("class=\"diff\""), std::string::npos);
  // self-contained: nothing to fetch
  for (const char* s : {"<script", "<link", "src=", "href=", "@import", "url("})
    EXPECT_EQ(html.find(s), std::string::npos) << s;
}
