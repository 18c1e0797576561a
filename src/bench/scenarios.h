// The production scenarios (internal to the bench module; see bench.h for the public entry point).
#pragma once

#include <string>
#include <vector>

#include "bench/bench.h"

namespace tmill::bench {

// Carried from one scenario to the next in `--scenario all`.
struct ScenarioState {
  int knee_concurrency = 0;      // concurrency sweep: first level over the TTFT SLO (0: none)
  int best_concurrency = 0;      // concurrency sweep: level with the highest output throughput
  int max_error_free_concurrency = 0;  // oom-boundary
};

// Prompts for scenario runs: the --dataset choice for the generic ones (`generic` true), random
// words otherwise; lengths are the scenario's unless the user set --input-len/--output-len.
std::vector<Prompt> scenario_prompts(const BenchContext& ctx, size_t n, int input_len, int output_len,
                                     uint64_t seed, bool generic);
// A plan with the common options applied (warm-ups, rate, burstiness, seed) and `params` filled in.
RunPlan make_plan(const BenchContext& ctx, std::string label, std::vector<Prompt> prompts,
                  int max_concurrency, double rate);
// Runs a plan and appends the run and its metrics to `sr`; returns the metrics.
const RunMetrics& run_into(const BenchContext& ctx, ScenarioResult& sr, const RunPlan& plan);
// "TTFT p50 120.3 ms (p99 180.0)" style fragments.
std::string fmt_ms(double ms);
std::string failures_text(const RunMetrics& m);

ScenarioResult run_custom(BenchContext& ctx);
ScenarioResult run_single_user(BenchContext& ctx);
ScenarioResult run_concurrency(BenchContext& ctx, ScenarioState& st);
ScenarioResult run_long_prompt(BenchContext& ctx);
ScenarioResult run_long_output(BenchContext& ctx);
ScenarioResult run_oom_boundary(BenchContext& ctx, ScenarioState& st);
ScenarioResult run_recovery(BenchContext& ctx, ScenarioState& st);

}  // namespace tmill::bench
