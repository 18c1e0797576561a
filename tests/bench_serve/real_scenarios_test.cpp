// `tokenmill bench serve --scenario all --short` against the real `tokenmill serve` on the bundled
// stories260K (512-token context, f32 KV cache of 1280 bytes per token, ~3.3 tokens per word of the
// load tester's random prompts). Every scenario must run, exit 0, and end with a status that is not
// "fail"; each must also have measured what it is meant to measure (checked per scenario below).
//
// Server settings, chosen so that every scenario is meaningful and fast (the run takes ~15 s):
//   --kv-cache-memory 640KiB   32 KV blocks of 16 tokens = 512 tokens: exactly one full-length
//                              sequence, so max_model_len stays 512 and long-prompt reaches 90% of
//                              it, but only two of oom-boundary's step-3 requests (~230 prompt + 16
//                              output tokens = 16 blocks each) fit at once; the others wait.
//   --max-queued-requests 4    a request that arrives while 4 others wait to be scheduled gets 429.
//                              In a run with at most 4 requests in flight (single-user, the 1/2/4
//                              concurrency sweep, long-prompt, long-output, oom-boundary steps 1-2,
//                              recovery's normal phases) at most 3 others can be waiting when one
//                              arrives, so it can never see a 429 (with a limit of 3 it can: one
//                              resident request finishes, the client sends the next before the
//                              engine has scheduled any of the 3 waiting). oom-boundary's step 3 (8
//                              streams sending 2 requests each, at most 2 resident, each a few ms
//                              on this model, so 8 in flight leave 6 to wait) does: its
//                              boundary is reached, with explicit rejections (or preemptions),
//                              never with lost requests. Recovery's overload phase (twice the
//                              largest error-free step: 8 streams, 3 resident) is rejected the same
//                              way and the server must recover from it.
//   --threads 2                the engine's compute threads (the test machine has 2 cores).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "loadgen/loadgen.h"
#include "real_bench.h"

namespace tmill::test {
namespace {

using json = nlohmann::json;

const std::vector<std::string> kScenarioServerArgs = {"--kv-cache-memory", "640KiB", "--max-queued-requests", "4",
                                                      "--threads", "2"};

// Adds up one failure kind over every run of every scenario.
int failures_of_kind(const json& report, const std::string& kind, std::set<std::string>* kinds) {
  int n = 0;
  for (const auto& s : report["scenarios"])
    for (const auto& r : s["runs"])
      for (const auto& [k, v] : r["failures"].items()) {
        kinds->insert(k);
        if (k == kind) n += v.get<int>();
      }
  return n;
}

const json& scenario(const json& report, const std::string& name) {
  for (const auto& s : report["scenarios"])
    if (s["name"] == name) return s;
  static const json none;
  ADD_FAILURE() << "scenario " << name << " missing";
  return none;
}

TEST(RealServer, AllScenariosShortPass) {
  const std::string dir = artifact_dir("scenarios");
  auto srv = start_server(dir, kScenarioServerArgs);
  ASSERT_TRUE(srv);
  auto m0 = srv->metrics();
  ASSERT_TRUE(m0.ok()) << m0.error();
  // --time-budget 180: ~12x what the run needs on an idle machine; every scenario gets an even share
  // of what is left, so a slow machine still runs them all. --timeout 60 per request: none takes a
  // second here, so a timeout means a hung stream.
  BenchCli b = run_bench_cli(*srv,
                             "--scenario all --short --time-budget 180 --timeout 60 --metrics-interval 0.25 "
                             "--report '" + dir + "/report.html'",
                             dir, "report");
  auto m1 = srv->metrics();
  ASSERT_TRUE(m1.ok()) << m1.error();
  EXPECT_EQ(srv->stop(), 0) << "the server must drain and exit 0:\n" << srv->log();
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_TRUE(b.report.is_object()) << "no JSON report";
  const json& rep = b.report;
  EXPECT_EQ(rep["model"], "stories260K");
  EXPECT_EQ(rep["max_model_len"], 512);

  // Six scenarios in order, none failed or skipped.
  ASSERT_EQ(rep["scenarios"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const json& s = rep["scenarios"][i];
    EXPECT_EQ(s["name"], loadgen::scenario_names()[i]);
    const std::string st = s["status"];
    EXPECT_TRUE(st == "ok" || st == "warn") << s["name"] << " [" << st << "]: " << s["verdict"];
    std::printf("%-13s [%s] %s\n", s["name"].get<std::string>().c_str(), st.c_str(),
                s["verdict"].get<std::string>().c_str());
  }

  // 1. single-user: 4 sequential requests, all with server usage.
  const json& su = scenario(rep, "single-user");
  ASSERT_EQ(su["runs"].size(), 1u);
  EXPECT_EQ(su["runs"][0]["completed"], 4);
  EXPECT_EQ(su["runs"][0]["usage_missing"], 0);
  EXPECT_GT(su["details"]["ttft_p50_ms"].get<double>(), 0);

  // 2. concurrency: levels 1, 2, 4, no failures, concurrency actually reached.
  const json& cs = scenario(rep, "concurrency");
  ASSERT_EQ(cs["details"]["levels"].size(), 3u);
  for (const auto& lv : cs["details"]["levels"]) {
    EXPECT_EQ(lv["failed"], 0) << lv.dump();
    EXPECT_EQ(lv["peak_concurrency"], lv["concurrency"]) << lv.dump();
  }

  // 3. long-prompt: calibrated on the server's usage; the last level lands near 90% of the context
  //    and fits it (prompt + 8 output tokens <= 512).
  const json& lp = scenario(rep, "long-prompt");
  EXPECT_EQ(lp["details"]["calibrated"], true);
  EXPECT_EQ(lp["details"]["context_len"], 512);
  ASSERT_EQ(lp["details"]["levels"].size(), 2u);
  const double last_tokens = lp["details"]["levels"][1]["prompt_tokens_mean"];
  EXPECT_GE(last_tokens, 0.8 * 512);
  EXPECT_LE(last_tokens, 512 - 8);
  for (const auto& lv : lp["details"]["levels"]) EXPECT_EQ(lv["failed"], 0) << lv.dump();

  // 4. long-output: ignore_eos honoured, every request generated all 64 tokens.
  const json& lo = scenario(rep, "long-output");
  EXPECT_EQ(lo["details"]["mean_output_tokens"], 64.0);
  EXPECT_GT(lo["details"]["requests_analyzed"].get<int>(), 0);

  // 5. oom-boundary: step 1 is clean, the boundary is reached (explicit 429s or preemptions, no lost
  //    request) and the server still answers afterwards.
  const json& oom = scenario(rep, "oom-boundary");
  const json& steps = oom["details"]["steps"];
  ASSERT_GE(steps.size(), 2u) << oom.dump();
  EXPECT_EQ(steps[0]["failed"], 0);
  EXPECT_EQ(steps[0]["preemptions"], 0.0);
  const json& last = steps.back();
  const bool preempted = last["preemptions"].get<double>() > 0;
  EXPECT_TRUE(last["failed"].get<int>() > 0 || preempted) << "boundary not reached: " << oom["verdict"];
  for (const auto& [k, v] : last["failures"].items()) EXPECT_EQ(k, "http_429") << last.dump();
  EXPECT_EQ(oom["details"]["server_alive_after"], true);
  EXPECT_EQ(oom["details"]["metrics_available"], true);

  // 6. recovery: every request ended in a success or an explicit error, latency recovered.
  const json& rc = scenario(rep, "recovery");
  EXPECT_EQ(rc["details"]["lost"], 0);
  EXPECT_EQ(rc["details"]["recovered"], true);
  EXPECT_GT(rc["details"]["succeeded"].get<int>(), 0);

  // The only failures anywhere are 429s, and the client counted exactly the rejections the server
  // counted (tokenmill:requests_rejected_total).
  std::set<std::string> kinds;
  const int rejected = failures_of_kind(rep, "http_429", &kinds);
  for (const auto& k : kinds) EXPECT_EQ(k, "http_429");
  EXPECT_EQ(rejected, delta(*m0, *m1, "tokenmill:requests_rejected_total"));
  EXPECT_GT(rejected, 0) << "--max-queued-requests 4 should have rejected some of the overload";

  // /metrics was scraped through the run: KV use and running requests were seen.
  ASSERT_EQ(rep["metrics"]["available"], true);
  const json& series = rep["metrics"]["series"];
  EXPECT_GE(series["t"].size(), 20u);
  double kv_max = 0, running_max = 0;
  for (const auto& v : series["kv_cache_usage_perc"]) if (v.is_number()) kv_max = std::max(kv_max, v.get<double>());
  for (const auto& v : series["num_requests_running"]) if (v.is_number()) running_max = std::max(running_max, v.get<double>());
  EXPECT_GT(kv_max, 0.0);
  EXPECT_LE(kv_max, 1.0);
  EXPECT_GE(running_max, 1.0);
}

// The full (not --short) oom-boundary starts at 256-word prompts: ~870 tokens of stories260K, over its
// 512-token context. The cap (80% of the context less the 128 output tokens) must hold in the
// server's tokens, so step 1 is a real load (4 x ~280+128 tokens, one resident at a time in 32 KV
// blocks) instead of a wall of 400 context_length_exceeded; step 2 (8 at once) is rejected with 429.
TEST(RealServer, OomBoundaryFullSizesPromptsInServerTokens) {
  const std::string dir = artifact_dir("oom_full");
  auto srv = start_server(dir, kScenarioServerArgs);
  ASSERT_TRUE(srv);
  BenchCli b = run_bench_cli(*srv, "--scenario oom-boundary --time-budget 180 --timeout 60 --metrics-interval 0.25",
                             dir, "oom");
  EXPECT_EQ(srv->stop(), 0) << srv->log();
  ASSERT_EQ(b.exit_code, 0) << b.err;
  ASSERT_TRUE(b.report.is_object());
  const json& oom = scenario(b.report, "oom-boundary");
  std::printf("oom-boundary [%s] %s\n", oom["status"].get<std::string>().c_str(),
              oom["verdict"].get<std::string>().c_str());
  EXPECT_EQ(oom["status"], "ok") << oom["verdict"];
  EXPECT_EQ(oom["details"]["calibrated"], true);
  EXPECT_GT(oom["details"]["tokens_per_word"].get<double>(), 2.0);  // stories260K: ~3.3
  const json& steps = oom["details"]["steps"];
  ASSERT_GE(steps.size(), 2u) << oom.dump();
  const json& first = steps[0];
  EXPECT_EQ(first["failed"], 0) << first.dump();
  EXPECT_EQ(first["completed"], 8);
  const int pt = first["prompt_tokens"];
  EXPECT_LE(pt + 128, 512) << first.dump();
  EXPECT_GE(pt, 0.8 * 512 - 128 - 40) << "prompts well below the cap: " << first.dump();
  EXPECT_EQ(first["tokens_in_flight"], 4 * (pt + 128));
  for (const auto& [k, v] : steps.back()["failures"].items()) EXPECT_EQ(k, "http_429") << steps.back().dump();
  const std::string want = "largest error-free load: 4 concurrent x (" + std::to_string(pt) + " prompt + 128 output";
  EXPECT_NE(oom["verdict"].get<std::string>().find(want), std::string::npos) << oom["verdict"];
}

}  // namespace
}  // namespace tmill::test
