// The production scenarios (internal to the loadgen module; see loadgen.h for the public entry point).
#pragma once

#include <string>
#include <vector>

#include "loadgen/loadgen.h"

namespace tmill::loadgen {

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

// Words of the built-in random prompts -> the server's prompt tokens: tokens ~= overhead + slope *
// words (the slope is ~1 for large vocabularies, several for small ones; the overhead is the chat
// template). calibrate_words() sends two probe requests (max_tokens 1; 16 and 64 words with --short,
// else 64 and 256) and fits the line to their usage; without usage it stays at slope 1, overhead 0.
struct WordCalibration {
  double slope = 1.0, overhead = 0.0;
  bool calibrated = false;
  std::vector<std::pair<double, double>> points;  // (words, server prompt tokens)
  void refit();  // least squares over `points` (needs two; a non-positive slope is ignored)
  // Words whose prompt is expected to have `tokens` tokens (at least 1).
  int words_for(double tokens) const;
};
WordCalibration calibrate_words(const BenchContext& ctx);

ScenarioResult run_custom(BenchContext& ctx);
ScenarioResult run_single_user(BenchContext& ctx);
ScenarioResult run_concurrency(BenchContext& ctx, ScenarioState& st);
ScenarioResult run_long_prompt(BenchContext& ctx);
ScenarioResult run_long_output(BenchContext& ctx);
ScenarioResult run_oom_boundary(BenchContext& ctx, ScenarioState& st);
ScenarioResult run_recovery(BenchContext& ctx, ScenarioState& st);
// recovery with --restart-command (scenarios_restart.cpp): the command kills and restarts the server
// in the middle of a steady load.
ScenarioResult run_recovery_restart(BenchContext& ctx);

}  // namespace tmill::loadgen
