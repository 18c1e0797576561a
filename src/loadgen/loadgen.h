// The loadgen module: `tokenmill bench serve`'s load tester for any OpenAI-compatible server (tokenmill, vLLM,
// llama-server). run_bench() runs either one custom run (the load options as given) or one/all of
// the six production scenarios, and returns everything the reports need.
//
//   BenchOptions o; o.base_url = "http://127.0.0.1:8000"; o.scenario = "single-user";
//   auto report = run_bench(o, "0.1.0");          // Result<BenchReport>
//   std::string table = render_text_summary(*report);
//   write_reports(*report, o);                      // --json / --report files
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loadgen/metrics_scraper.h"
#include "loadgen/options.h"
#include "loadgen/run_metrics.h"
#include "loadgen/runner.h"

namespace tmill::loadgen {

struct ScenarioResult {
  std::string name;     // "custom" for a plain run, else a scenario name
  std::string title;    // what it measures, one line
  std::string verdict;  // one line
  std::string status = "ok";  // ok | warn | fail | skipped
  std::vector<RunResult> runs;
  std::vector<RunMetrics> metrics;  // parallel to runs
  nlohmann::json details = nlohmann::json::object();  // scenario-specific figures
};

struct BenchReport {
  std::string tool_version, base_url, model, endpoint, scenario;
  std::string started_at, finished_at;  // ISO 8601 UTC
  double duration_s = 0;
  int max_model_len = 0;
  nlohmann::json parameters = nlohmann::json::object();
  std::vector<ScenarioResult> scenarios;
  bool metrics_available = false;
  std::vector<MetricsSample> metrics_series;  // t = seconds since the benchmark started
};

// The six scenarios, in the order `--scenario all` runs them.
const std::vector<std::string>& scenario_names();

Result<BenchReport> run_bench(const BenchOptions& opts, const std::string& tool_version);

// Reports (report_json.cpp, report_text.cpp, report_html.cpp).
nlohmann::json report_to_json(const BenchReport& report);
nlohmann::json run_to_json(const RunResult& run, const RunMetrics& m, bool per_request = true);
nlohmann::json summary_to_json(const Summary& s);
std::string render_text_summary(const BenchReport& report);
std::string render_html_report(const nlohmann::json& report_json);
Status write_reports(const BenchReport& report, const BenchOptions& opts);

}  // namespace tmill::loadgen
