// Scenario presets against stub servers whose behaviour is known (queueing, rejections, prefill).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "loadgen/loadgen.h"
#include "stub_server.h"

namespace tmill::loadgen {
namespace {

using test::StubConfig;
using test::StubServer;

BenchOptions scenario_opts(const StubServer& s, const std::string& name) {
  BenchOptions o;
  o.base_url = s.url();
  o.progress = false;
  o.metrics_interval_s = 0.2;
  o.scenario = name;
  o.short_mode = true;
  o.timeout_s = 30;
  return o;
}

ScenarioResult run_scenario(const BenchOptions& o) {
  auto r = run_bench(o, "test");
  if (!r.ok()) throw std::runtime_error(r.error());
  return r->scenarios.at(0);
}

TEST(Scenarios, SingleUserIsSequentialBaseline) {
  StubServer stub(StubConfig{});
  auto sr = run_scenario(scenario_opts(stub, "single-user"));
  ASSERT_EQ(sr.runs.size(), 1u);
  EXPECT_EQ(sr.status, "ok");
  EXPECT_EQ(sr.metrics[0].completed, 4);
  EXPECT_EQ(sr.metrics[0].peak_concurrency, 1);
  EXPECT_EQ(stub.max_running(), 1);
  EXPECT_NEAR(sr.metrics[0].ttft_ms.p50, 200, 20);
  EXPECT_NE(sr.verdict.find("baseline TTFT p50"), std::string::npos);
}

TEST(Scenarios, ConcurrencySweepFindsTheKnee) {
  // Two decode slots: at concurrency 4 half the requests queue behind a full 520 ms generation.
  StubConfig c;
  c.max_parallel = 2;
  StubServer stub(c);
  auto o = scenario_opts(stub, "concurrency");
  o.slo_ttft_ms = 400;
  auto sr = run_scenario(o);
  ASSERT_EQ(sr.runs.size(), 3u);  // short: 1, 2, 4
  EXPECT_EQ(sr.details["knee_concurrency"], 4);
  EXPECT_NEAR(sr.metrics[0].ttft_ms.p99, 200, 25);
  EXPECT_NEAR(sr.metrics[1].ttft_ms.p99, 200, 25);
  EXPECT_GT(sr.metrics[2].ttft_ms.p99, 600);
  EXPECT_NE(sr.verdict.find("from concurrency 4"), std::string::npos) << sr.verdict;
  EXPECT_EQ(sr.details["levels"].size(), 3u);
}

TEST(Scenarios, LongPromptCalibratesToTheContext) {
  StubConfig c;
  c.max_model_len = 800;
  c.prefill_us_per_token = 500;  // 0.5 ms per prompt token on top of the 200 ms TTFT
  StubServer stub(c);
  auto sr = run_scenario(scenario_opts(stub, "long-prompt"));
  EXPECT_EQ(sr.status, "ok") << sr.verdict;
  EXPECT_EQ(sr.details["context_len"], 800);
  EXPECT_EQ(sr.details["context_source"], "server");
  EXPECT_TRUE(sr.details["calibrated"].get<bool>());
  EXPECT_NEAR(sr.details["tokens_per_word"].get<double>(), 1.0, 1e-9);
  EXPECT_NEAR(sr.details["template_overhead_tokens"].get<double>(), 5.0, 1e-9);
  const auto& last = sr.details["levels"].back();
  // 90% of (800 - 8 output) - 4 = 708 tokens; calibrated prompts land on it exactly.
  EXPECT_NEAR(last["prompt_tokens_mean"].get<double>(), 708, 1.0);
  EXPECT_NEAR(sr.metrics.back().ttft_ms.p50, 200 + 0.5 * 708, 25);
  EXPECT_GT(sr.metrics.back().ttft_ms.p50, sr.metrics.front().ttft_ms.p50);
}

TEST(Scenarios, LongOutputIsStableOnAFixedPace) {
  StubConfig c;
  c.ttft_ms = 50;
  c.itl_ms = 10;
  StubServer stub(c);
  auto sr = run_scenario(scenario_opts(stub, "long-output"));
  EXPECT_EQ(sr.status, "ok") << sr.verdict;
  EXPECT_NEAR(sr.details["early_itl_ms"].get<double>(), 10, 1.5);
  EXPECT_NEAR(sr.details["late_itl_ms"].get<double>(), 10, 1.5);
  EXPECT_EQ(sr.details["mean_output_tokens"], 64);
  EXPECT_NE(sr.verdict.find("stable"), std::string::npos);
  auto body = nlohmann::json::parse(stub.last_body());
  EXPECT_EQ(body["ignore_eos"], true);
}

TEST(Scenarios, OomBoundaryStopsAtRejectionsAndChecksHealth) {
  StubConfig c;
  c.ttft_ms = 100;
  c.itl_ms = 10;
  c.reject_above = 6;  // 429 beyond 6 requests in the server
  StubServer stub(c);
  auto sr = run_scenario(scenario_opts(stub, "oom-boundary"));
  ASSERT_EQ(sr.details["steps"].size(), 3u);  // 2, 4, then 8 concurrent: rejected
  EXPECT_EQ(sr.details["steps"][1]["failed"], 0);
  // 8 streams, two requests each: the first burst has 2 over the limit, and every later send that
  // arrives while 6 are still held is rejected too. The client counts what the server rejected.
  const int rejected = sr.details["steps"][2]["failures"]["http_429"].get<int>();
  EXPECT_EQ(sr.details["steps"][2]["completed"].get<int>() + sr.details["steps"][2]["failed"].get<int>(), 16);
  EXPECT_GE(rejected, 2);
  EXPECT_EQ(rejected, stub.rejected());
  EXPECT_TRUE(sr.details["server_alive_after"].get<bool>());
  EXPECT_EQ(sr.status, "ok");
  EXPECT_NE(sr.verdict.find("largest error-free load: 4 concurrent"), std::string::npos) << sr.verdict;
  EXPECT_NE(sr.verdict.find("http_429 x" + std::to_string(rejected)), std::string::npos) << sr.verdict;
}

TEST(Scenarios, OomBoundaryCountsPreemptionsFromMetrics) {
  StubConfig c;
  c.ttft_ms = 50;
  c.itl_ms = 5;
  c.preempt_above = 3;
  StubServer stub(c);
  auto sr = run_scenario(scenario_opts(stub, "oom-boundary"));
  ASSERT_EQ(sr.details["steps"].size(), 2u);  // 2 fine, 4 -> preemptions
  // Every admission that makes 4 running counts one; how many of the second round's do depends on
  // how they interleave with the first round's ends. The step reports the server's own count.
  const double preempted = sr.details["steps"][1]["preemptions"].get<double>();
  EXPECT_GE(preempted, 1.0);
  EXPECT_EQ(preempted, stub.preemptions());
  EXPECT_NE(sr.verdict.find(std::to_string(stub.preemptions()) + " preemptions"), std::string::npos) << sr.verdict;
}

TEST(Scenarios, RecoveryAfterOverload) {
  // One decode slot: the overload phase queues 8 clients; afterwards a single client is back to
  // the 200 ms baseline once the queue has drained.
  StubConfig c;
  c.max_parallel = 1;
  c.ttft_ms = 100;
  c.itl_ms = 5;
  StubServer stub(c);
  auto sr = run_scenario(scenario_opts(stub, "recovery"));
  EXPECT_EQ(sr.status, "ok") << sr.verdict;
  EXPECT_TRUE(sr.details["recovered"].get<bool>());
  EXPECT_NEAR(sr.details["baseline_p50_ttft_ms"].get<double>(), 100, 15);
  EXPECT_GT(sr.details["overload_p50_ttft_ms"].get<double>(), 400);
  EXPECT_EQ(sr.details["lost"], 0);
  EXPECT_EQ(sr.details["phase_starts_s"].size(), 3u);
  // The queue (up to 7 x ~180 ms) must drain first.
  EXPECT_GT(sr.details["recovery_s"].get<double>(), 0.0);
  EXPECT_LT(sr.details["recovery_s"].get<double>(), 3.0);
  EXPECT_NE(sr.verdict.find("no request lost"), std::string::npos);
}

TEST(Scenarios, RecoveryReportsLostRequests) {
  StubConfig c;
  c.ttft_ms = 50;
  c.itl_ms = 5;
  c.drop_after_chunks = 2;
  c.drop_every = 3;
  StubServer stub(c);
  auto sr = run_scenario(scenario_opts(stub, "recovery"));
  EXPECT_EQ(sr.status, "fail");
  EXPECT_GT(sr.details["lost"].get<int>(), 0);
  EXPECT_NE(sr.verdict.find("LOST"), std::string::npos);
}

TEST(Scenarios, AllScenariosShareTheTimeBudget) {
  StubConfig c;
  c.ttft_ms = 80;
  c.itl_ms = 8;
  StubServer stub(c);
  auto o = scenario_opts(stub, "all");
  o.time_budget_s = 6;
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_bench(o, "test");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_EQ(r->scenarios.size(), 6u);
  // Each scenario gets its share; in-flight requests may finish after a deadline (~0.3 s each).
  EXPECT_LT(took, 6 + 2.0);
  const auto& rec = r->scenarios[5];
  ASSERT_EQ(rec.runs.size(), 1u);
  double planned = 0;
  for (const auto& d : rec.runs[0].params["phase_durations_s"]) planned += d.get<double>();
  // Scaled down from 3+3+5 s to 90% of what was left when it started, but never below 10% (1.1 s;
  // scenarios_stress.cpp): with 6 s for six scenarios about 1.2 s is left, right at that floor.
  EXPECT_LT(planned, 11.0);
  EXPECT_LE(planned, std::max(0.9 * (6 - rec.runs[0].start_s), 0.1 * 11.0) + 0.05);
}

TEST(Scenarios, UnknownScenarioIsAnError) {
  StubServer stub(StubConfig{});
  auto o = scenario_opts(stub, "nope");
  auto r = run_bench(o, "t");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("unknown scenario"), std::string::npos);
}

}  // namespace
}  // namespace tmill::loadgen
