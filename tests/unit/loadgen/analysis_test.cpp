// Metrics over synthetic request results: throughput, TPOT/ITL, timeline, scenario analyses,
// Prometheus parsing.
#include <gtest/gtest.h>

#include "loadgen/metrics_scraper.h"
#include "loadgen/run_metrics.h"
#include "loadgen/scenario_analysis.h"

namespace tmill::loadgen {
namespace {

// A successful request sent at `send`, first chunk after `ttft`, then `n-1` chunks every `gap`.
RequestResult req(double send, double ttft, double gap, int n, int phase = 0) {
  RequestResult r;
  r.success = true;
  r.send_s = send;
  r.ttft_s = ttft;
  for (int i = 0; i < n; ++i) r.chunk_s.push_back(ttft + gap * i);
  r.e2el_s = r.chunk_s.back() + 0.001;
  r.output_tokens = n;
  r.prompt_tokens = 10;
  r.usage_reported = true;
  r.phase = phase;
  return r;
}
RequestResult failed(double send, FailureKind k, int status = 0, int phase = 0) {
  RequestResult r;
  r.send_s = send;
  r.e2el_s = 0.05;
  r.failure = k;
  r.http_status = status;
  r.phase = phase;
  return r;
}

TEST(RunMetrics, ThroughputLatencyAndFailures) {
  RunResult run;
  run.requests = {req(0.0, 0.2, 0.02, 11), req(0.0, 0.4, 0.02, 11), failed(0.1, FailureKind::Http, 429),
                  failed(0.2, FailureKind::Timeout)};
  run.duration_s = 2.0;
  run.peak_concurrency = 4;
  SloConfig slo;
  slo.ttft_ms = 300;
  auto m = compute_run_metrics(run, slo);
  EXPECT_EQ(m.completed, 2);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.failures.at("http_429"), 1);
  EXPECT_EQ(m.failures.at("timeout"), 1);
  EXPECT_EQ(m.output_tokens, 22);
  EXPECT_EQ(m.input_tokens, 20);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 11.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 21.0);
  EXPECT_NEAR(m.ttft_ms.mean, 300, 1e-9);
  // TPOT = (E2E - TTFT)/(n-1) = (0.2 + 0.001)/10 s = 20.1 ms for both.
  EXPECT_NEAR(m.tpot_ms.p50, 20.1, 1e-9);
  EXPECT_EQ(m.itl_ms.count, 20u);
  EXPECT_NEAR(m.itl_ms.p99, 20.0, 1e-9);
  EXPECT_EQ(m.good, 1);  // only the 200 ms TTFT request meets ttft:300
  EXPECT_DOUBLE_EQ(m.request_goodput, 0.5);
  EXPECT_EQ(m.peak_concurrency, 4);
}

TEST(RunMetrics, SingleTokenRequestsHaveNoTpot) {
  RunResult run;
  run.requests = {req(0, 0.1, 0, 1)};
  run.duration_s = 1;
  auto m = compute_run_metrics(run, {});
  EXPECT_EQ(m.tpot_ms.count, 0u);
  EXPECT_EQ(m.itl_ms.count, 0u);
  EXPECT_FALSE(m.goodput_enabled);
  EXPECT_EQ(request_tpot_ms(run.requests[0]), 0.0);
}

TEST(RunMetrics, TimelineBucketsTokensErrorsAndConcurrency) {
  RunResult run;
  // 10 chunks at 0.5 .. 1.4 s, usage says 20 tokens (2 per chunk); in flight 0 .. ~1.4 s.
  auto a = req(0.0, 0.5, 0.1, 10);
  a.output_tokens = 20;
  run.requests = {a, failed(2.5, FailureKind::Disconnect)};
  run.duration_s = 3.0;
  auto m = compute_run_metrics(run, {}, 1.0);
  ASSERT_EQ(m.timeline.size(), 4u);
  EXPECT_NEAR(m.timeline[0].output_tokens, 10, 1e-9);  // chunks at 0.5..0.9
  EXPECT_NEAR(m.timeline[1].output_tokens, 10, 1e-9);  // 1.0..1.4
  EXPECT_EQ(m.timeline[1].completed, 1);
  EXPECT_EQ(m.timeline[2].errors, 1);
  EXPECT_NEAR(m.timeline[0].concurrency, 1.0, 1e-9);
  EXPECT_NEAR(m.timeline[1].concurrency, 0.401, 1e-6);
  EXPECT_NEAR(m.max_output_tokens_per_s, 10, 1e-9);
}

TEST(ScenarioAnalysis, KneeIsFirstLevelOverSlo) {
  EXPECT_EQ(find_knee({1, 2, 4, 8}, {100, 900, 2500, 4000}, 2000), 4);
  EXPECT_FALSE(find_knee({1, 2}, {100, 200}, 2000).has_value());
  EXPECT_EQ(find_knee({1, 2}, {3000, 200}, 2000), 1);
}

TEST(ScenarioAnalysis, ItlDriftEarlyVsLate) {
  RunResult run;
  RequestResult r;
  r.success = true;
  double t = 0.1;
  for (int i = 0; i <= 40; ++i) {  // gaps grow linearly from 10 ms to 30 ms
    r.chunk_s.push_back(t);
    t += 0.010 + 0.020 * i / 39.0;
  }
  r.output_tokens = 41;
  run.requests = {r};
  auto d = analyze_itl_drift(run, 4);
  EXPECT_EQ(d.requests_used, 1);
  ASSERT_EQ(d.by_position_ms.size(), 4u);
  // First quarter: gaps 0..9 -> mean of 10 + 20*i/39 for i=0..9 = 10 + 20*4.5/39.
  EXPECT_NEAR(d.early_ms, 10 + 20 * 4.5 / 39, 1e-6);
  EXPECT_NEAR(d.late_ms, 10 + 20 * 34.5 / 39, 1e-6);
  EXPECT_NEAR(d.drift_pct, (d.late_ms / d.early_ms - 1) * 100, 1e-9);
  EXPECT_GT(d.drift_pct, 100);
}

TEST(ScenarioAnalysis, RecoveryTimeAndLostRequests) {
  RunResult run;
  run.phase_starts_s = {0, 10, 20};
  for (int i = 0; i < 10; ++i) run.requests.push_back(req(i, 0.1, 0.01, 5, 0));   // baseline 100 ms
  for (int i = 0; i < 10; ++i) run.requests.push_back(req(10 + i, 2.0, 0.01, 5, 1));  // overload 2 s
  run.requests.push_back(failed(15, FailureKind::Http, 429, 1));                  // explicit
  run.requests.push_back(failed(16, FailureKind::Timeout, 0, 1));                 // lost
  // After: slow for sends at 20..23, then back to 120 ms from 24 s on.
  for (int i = 0; i < 12; ++i) run.requests.push_back(req(20 + i, i < 4 ? 1.0 : 0.12, 0.01, 5, 2));
  auto a = analyze_recovery(run, 1.5, 3);
  EXPECT_DOUBLE_EQ(a.baseline_p50_ms, 100);
  EXPECT_DOUBLE_EQ(a.overload_p50_ms, 2000);
  EXPECT_TRUE(a.recovered);
  // Windows of 3: starting at 22 s -> {1000, 1000, 120}: p50 1000; at 23 s -> {1000, 120, 120}: 120 <= 150.
  EXPECT_DOUBLE_EQ(a.recovery_s, 3.0);
  EXPECT_EQ(a.explicit_errors, 1);
  EXPECT_EQ(a.lost, 1);
  EXPECT_EQ(a.sent, 34);
}

TEST(ScenarioAnalysis, NoRecovery) {
  RunResult run;
  run.phase_starts_s = {0, 5, 10};
  for (int i = 0; i < 5; ++i) run.requests.push_back(req(i, 0.1, 0.01, 3, 0));
  for (int i = 0; i < 5; ++i) run.requests.push_back(req(10 + i, 0.5, 0.01, 3, 2));
  auto a = analyze_recovery(run);
  EXPECT_FALSE(a.recovered);
  EXPECT_EQ(a.lost, 0);
}

TEST(ScenarioAnalysis, RecoveryLimitHasAnAbsoluteFloorForMillisecondBaselines) {
  // A 1 ms baseline on loopback: 2.5 ms afterwards is scheduler jitter, not a server that failed to
  // recover; 1.5 x 1 ms would call it one. 7 ms is past baseline + 5 ms and must still fail.
  auto run_with_after = [](double after_s) {
    RunResult run;
    run.phase_starts_s = {0, 5, 10};
    for (int i = 0; i < 5; ++i) run.requests.push_back(req(i, 0.001, 0.01, 3, 0));
    for (int i = 0; i < 5; ++i) run.requests.push_back(req(5 + i, 0.050, 0.01, 3, 1));
    for (int i = 0; i < 5; ++i) run.requests.push_back(req(10 + i, after_s, 0.01, 3, 2));
    return run;
  };
  auto ok = analyze_recovery(run_with_after(0.0025));
  EXPECT_DOUBLE_EQ(ok.limit_ms, 1.0 + kRecoverySlackMs);
  EXPECT_TRUE(ok.recovered);
  EXPECT_FALSE(analyze_recovery(run_with_after(0.007)).recovered);
  // With no slack the factor alone decides, as before.
  EXPECT_FALSE(analyze_recovery(run_with_after(0.0025), 1.5, 0, 0.0).recovered);
  // For a 100 ms baseline the factor is the larger bound: 150 ms.
  RunResult slow;
  slow.phase_starts_s = {0, 5, 10};
  for (int i = 0; i < 5; ++i) slow.requests.push_back(req(i, 0.1, 0.01, 3, 0));
  for (int i = 0; i < 5; ++i) slow.requests.push_back(req(10 + i, 0.16, 0.01, 3, 2));
  auto s = analyze_recovery(slow);
  EXPECT_DOUBLE_EQ(s.limit_ms, 150);
  EXPECT_FALSE(s.recovered);
}

// --restart-command: the command starts at 2.0; a stream in flight is cut (lost), two requests find
// nothing listening (refused, not lost), one gets 503 while the new server loads (explicit), then the
// server serves: the first token of the first success sent after the last failure, 2.6 + 0.05.
TEST(ScenarioAnalysis, RestartOutageLostRefusedAndTimeToServe) {
  RunResult run;
  run.requests.push_back(req(0.5, 0.01, 0.01, 3));
  run.requests.push_back(req(1.0, 0.03, 0.01, 3));
  RequestResult cut = failed(1.9, FailureKind::Disconnect);
  cut.e2el_s = 0.2;  // ended at 2.1, after the command started
  run.requests.push_back(cut);
  RequestResult refused = failed(2.15, FailureKind::Connection);
  refused.connect_failed = true;
  run.requests.push_back(refused);
  run.requests.push_back(refused);
  run.requests.back().send_s = 2.2;
  RequestResult dropped = failed(1.95, FailureKind::Connection);  // sent, then the connection died
  dropped.e2el_s = 0.1;
  run.requests.push_back(dropped);
  run.requests.push_back(failed(2.5, FailureKind::Http, 503));
  run.requests.push_back(req(2.45, 0.5, 0.01, 3));  // sent before the last failure: not the first serve
  run.requests.push_back(req(2.6, 0.05, 0.01, 3));
  run.requests.push_back(req(2.7, 0.02, 0.01, 3));
  const RestartAnalysis a = analyze_restart(run, 2.0);
  EXPECT_EQ(a.sent, 10);
  EXPECT_EQ(a.succeeded, 5);
  EXPECT_EQ(a.lost, 2);
  EXPECT_EQ(a.lost_by_kind.at("disconnect"), 1);
  EXPECT_EQ(a.lost_by_kind.at("connection"), 1);
  EXPECT_EQ(a.refused, 2);
  EXPECT_EQ(a.explicit_errors, 1);
  EXPECT_TRUE(a.outage_seen);
  ASSERT_TRUE(a.served_again);
  EXPECT_NEAR(a.time_to_serve_s, 0.65, 1e-9);
  EXPECT_NEAR(a.outage_first_s, 2.05, 1e-9);
  EXPECT_NEAR(a.before_p50_ms, 20.0, 1e-6);  // the two before the command: 10 and 30 ms
  EXPECT_NEAR(a.after_p50_ms, 20.0, 1e-6);   // only the one sent once it served (2.7)
}

TEST(ScenarioAnalysis, RestartWithoutOutageOrWithoutRecovery) {
  RunResult ok;
  ok.requests = {req(0.5, 0.01, 0.01, 3), req(2.5, 0.01, 0.01, 3)};
  RestartAnalysis a = analyze_restart(ok, 2.0);
  EXPECT_FALSE(a.outage_seen);
  EXPECT_FALSE(a.served_again);
  RunResult down;
  down.requests = {req(0.5, 0.01, 0.01, 3), failed(2.5, FailureKind::Connection)};
  down.requests.back().connect_failed = true;
  a = analyze_restart(down, 2.0);
  EXPECT_TRUE(a.outage_seen);
  EXPECT_FALSE(a.served_again);
  EXPECT_EQ(a.refused, 1);
  EXPECT_EQ(a.lost, 0);
}

TEST(Prometheus, ParsesSumsLabelSetsAndMaxForPerc) {
  const char* text =
      "# HELP vllm:num_requests_running Number of requests.\n"
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{model_name=\"a\",engine=\"0\"} 3.0\n"
      "vllm:num_requests_running{model_name=\"a\",engine=\"1\"} 2\n"
      "vllm:num_requests_waiting{model_name=\"a b}\\\"c\"} 7 1712345678000\r\n"
      "vllm:kv_cache_usage_perc{engine=\"0\"} 0.25\n"
      "vllm:kv_cache_usage_perc{engine=\"1\"} 0.75\n"
      "vllm:num_preemptions_total 4\n"
      "garbage line without value\n"
      "process_cpu_seconds_total 1.5e3\n";
  auto all = parse_prometheus_text(text);
  EXPECT_DOUBLE_EQ(all.at("vllm:num_requests_running"), 5.0);
  EXPECT_DOUBLE_EQ(all.at("vllm:num_requests_waiting"), 7.0);
  EXPECT_DOUBLE_EQ(all.at("vllm:kv_cache_usage_perc"), 0.75);
  EXPECT_DOUBLE_EQ(all.at("process_cpu_seconds_total"), 1500.0);
  auto m = extract_serving_metrics(all);
  EXPECT_DOUBLE_EQ(m.at(kRunning), 5);
  EXPECT_DOUBLE_EQ(m.at(kWaiting), 7);
  EXPECT_DOUBLE_EQ(m.at(kKvUsage), 0.75);
  EXPECT_DOUBLE_EQ(m.at(kPreemptions), 4);
  // Older vLLM name for KV usage.
  auto old = extract_serving_metrics(parse_prometheus_text("vllm:gpu_cache_usage_perc 0.5\n"));
  EXPECT_DOUBLE_EQ(old.at(kKvUsage), 0.5);
  EXPECT_TRUE(extract_serving_metrics(parse_prometheus_text("foo 1\n")).empty());
}

}  // namespace
}  // namespace tmill::loadgen
