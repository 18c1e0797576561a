// Reports: JSON layout, HTML embedding, the stdout table; and the CLI end to end.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/mmap.h"
#include "loadgen/loadgen.h"
#include "stub_server.h"
#include "test_support.h"

namespace tmill::loadgen {
namespace {

using test::StubConfig;
using test::StubServer;

BenchReport small_report(const StubServer& stub) {
  BenchOptions o;
  o.base_url = stub.url();
  o.progress = false;
  o.metrics_interval_s = 0.1;
  o.num_prompts = 6;
  o.max_concurrency = 3;
  o.input_len = 10;
  o.output_len = 8;
  o.goodput = *parse_slo({"ttft:150", "tpot:50"});
  auto r = run_bench(o, "9.9.9");
  if (!r.ok()) throw std::runtime_error(r.error());
  return std::move(*r);
}

void expect_summary(const nlohmann::json& s) {
  for (const char* k : {"mean", "std", "p50", "p90", "p95", "p99", "max"}) EXPECT_TRUE(s.contains(k)) << k;
}

TEST(Reports, JsonHasEveryRequiredFigure) {
  StubServer stub(StubConfig{.ttft_ms = 100, .itl_ms = 10});
  auto rep = small_report(stub);
  auto j = report_to_json(rep);
  EXPECT_EQ(j["tool"], "tokenmill bench serve");
  EXPECT_EQ(j["version"], "9.9.9");
  EXPECT_EQ(j["base_url"], stub.url());
  EXPECT_EQ(j["model"], "stub-model");
  EXPECT_EQ(j["endpoint"], "chat");
  EXPECT_EQ(j["scenario"], "custom");
  EXPECT_FALSE(j["started_at"].get<std::string>().empty());
  EXPECT_EQ(j["parameters"]["num_prompts"], 6);
  EXPECT_EQ(j["parameters"]["goodput_slo"]["ttft_ms"], 150.0);
  // Single run: figures at top level and under scenarios[0].runs[0].
  for (const auto* run : {&j, &j["scenarios"][0]["runs"][0]}) {
    const auto& r = *run;
    for (const char* k : {"completed", "failed", "duration_s", "request_throughput", "output_throughput",
                          "total_token_throughput", "input_tokens", "output_tokens", "peak_concurrency",
                          "request_goodput", "failures"})
      EXPECT_TRUE(r.contains(k)) << k;
    for (const char* k : {"ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"}) expect_summary(r[k]);
    EXPECT_EQ(r["completed"], 6);
    EXPECT_EQ(r["output_tokens"], 48);
    EXPECT_EQ(r["input_tokens"], 6 * 15);
  }
  // TTFT 100 ms < 150 and TPOT 10 ms < 50: every request is good.
  EXPECT_NEAR(j["request_goodput"].get<double>(), j["request_throughput"].get<double>(), 1e-9);
  const auto& run = j["scenarios"][0]["runs"][0];
  EXPECT_EQ(run["requests"]["ttft_ms"].size(), 6u);
  EXPECT_EQ(run["timeline"]["t"].size(), run["timeline"]["output_tokens"].size());
  EXPECT_TRUE(j["metrics"]["available"].get<bool>());
  EXPECT_GT(j["metrics"]["series"]["num_requests_running"].size(), 0u);
}

TEST(Reports, TextSummaryLooksLikeVllm) {
  StubServer stub(StubConfig{.ttft_ms = 50, .itl_ms = 5});
  auto t = render_text_summary(small_report(stub));
  EXPECT_NE(t.find("============ Serving Benchmark Result ============"), std::string::npos) << t;
  EXPECT_NE(t.find("Successful requests:                     6"), std::string::npos) << t;
  EXPECT_NE(t.find("Request goodput (req/s):"), std::string::npos);
  EXPECT_NE(t.find("Median TTFT (ms):"), std::string::npos);
  EXPECT_NE(t.find("P99 TPOT (ms):"), std::string::npos);
}

TEST(Reports, HtmlIsSelfContainedAndEscapesData) {
  nlohmann::json j = {{"model", "m</script><b>"}, {"base_url", "http://x"}, {"scenarios", nlohmann::json::array()},
                      {"metrics", {{"available", false}}}, {"note", "a <!-- b </script> c"}};
  auto html = render_html_report(j);
  EXPECT_EQ(html.find("<b>"), std::string::npos);  // title escaped
  EXPECT_EQ(html.find("<!-- b"), std::string::npos);
  // Exactly the two closing tags of our own scripts.
  size_t n = 0;
  for (size_t p = html.find("</script>"); p != std::string::npos; p = html.find("</script>", p + 1)) ++n;
  EXPECT_EQ(n, 2u);
  EXPECT_NE(html.find("\\u003c/script>"), std::string::npos);
  EXPECT_EQ(html.find("http://cdn"), std::string::npos);
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_NE(html.find("data-render=\"pending\""), std::string::npos);
}

TEST(Cli, BenchServeAllScenariosShortWritesReports) {
  StubConfig c;
  c.ttft_ms = 60;
  c.itl_ms = 6;
  StubServer stub(c);
  std::string dir = test::temp_dir();
  auto out = test::run_command(test::tokenmill_binary() + " bench serve --base-url " + stub.url() +
                               " --scenario all --short --no-progress --metrics-interval 0.2 --json " + dir +
                               "/r.json --report " + dir + "/r.html");
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_NE(out.out.find("Serving Benchmark Result"), std::string::npos);
  EXPECT_NE(out.out.find("Verdicts"), std::string::npos);
  auto text = read_file(dir + "/r.json");
  ASSERT_TRUE(text.ok());
  auto j = nlohmann::json::parse(*text);
  ASSERT_EQ(j["scenarios"].size(), 6u);
  std::vector<std::string> names;
  for (const auto& s : j["scenarios"]) {
    names.push_back(s["name"]);
    EXPECT_FALSE(s["verdict"].get<std::string>().empty());
    EXPECT_NE(s["status"], "fail") << s["name"] << ": " << s["verdict"];
  }
  EXPECT_EQ(names, scenario_names());
  EXPECT_EQ(j["scenarios"][1]["runs"].size(), 3u);  // concurrency sweep levels 1, 2, 4
  auto html = read_file(dir + "/r.html");
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("bench-data"), std::string::npos);
  std::cout << out.out;  // the sample table, for the log
}

TEST(Cli, BadArguments) {
  auto a = test::run_command(test::tokenmill_binary() + " bench serve --base-url http://127.0.0.1:1 --request-rate fast");
  EXPECT_EQ(a.exit_code, 2);
  auto b = test::run_command(test::tokenmill_binary() + " bench serve --base-url http://127.0.0.1:1 --goodput ttft");
  EXPECT_EQ(b.exit_code, 2);
  auto c = test::run_command(test::tokenmill_binary() + " bench serve --base-url http://127.0.0.1:1 --model m --num-prompts 0");
  EXPECT_EQ(c.exit_code, 1);
  EXPECT_NE(c.err.find("num-prompts"), std::string::npos);
}

}  // namespace
}  // namespace tmill::loadgen
