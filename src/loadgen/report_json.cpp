// JSON report: every figure, the run parameters, per-request samples, timelines and the scraped
// /metrics series. Layout (see docs/bench-serve.md):
//   {tool, version, base_url, model, endpoint, scenario, started_at, finished_at, duration_s,
//    parameters{...}, scenarios:[{name, title, status, verdict, details{...}, runs:[RUN...]}],
//    metrics:{available, series:{t:[], kv_cache_usage_perc:[], ...}},
//    + the RUN fields at top level when the invocation made exactly one run}
//   RUN = {label, params, completed, failed, failures{kind:n}, duration_s, request_throughput,
//          request_goodput, output_throughput, total_token_throughput, input_tokens, output_tokens,
//          peak_concurrency, ttft_ms/tpot_ms/itl_ms/e2el_ms{mean,std,p50,p90,p95,p99,max},
//          timeline{t[],...}, requests{send_s[],...}}
#include <cmath>

#include "core/mmap.h"
#include "loadgen/loadgen.h"

namespace tmill::loadgen {

nlohmann::json summary_to_json(const Summary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"std", s.std}, {"p50", s.p50}, {"p90", s.p90},
          {"p95", s.p95},     {"p99", s.p99},   {"max", s.max}, {"min", s.min}};
}

nlohmann::json run_to_json(const RunResult& run, const RunMetrics& m, bool per_request) {
  nlohmann::json j;
  j["label"] = run.label;
  j["params"] = run.params;
  j["start_s"] = run.start_s;
  j["truncated"] = run.truncated;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["failures"] = m.failures;
  j["first_error"] = m.first_error;
  j["resent"] = count_resent(run.requests);
  j["duration_s"] = m.duration_s;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = m.goodput_enabled ? nlohmann::json(m.request_goodput) : nlohmann::json(nullptr);
  j["good_requests"] = m.goodput_enabled ? nlohmann::json(m.good) : nlohmann::json(nullptr);
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["input_tokens"] = m.input_tokens;
  j["output_tokens"] = m.output_tokens;
  j["usage_missing"] = m.usage_missing;
  j["peak_concurrency"] = m.peak_concurrency;
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["ttft_ms"] = summary_to_json(m.ttft_ms);
  j["tpot_ms"] = summary_to_json(m.tpot_ms);
  j["itl_ms"] = summary_to_json(m.itl_ms);
  j["e2el_ms"] = summary_to_json(m.e2el_ms);
  if (!run.phase_starts_s.empty()) {
    j["phase_starts_s"] = run.phase_starts_s;
    j["phase_names"] = run.phase_names;
  }
  nlohmann::json tl = {{"t", nlohmann::json::array()}, {"output_tokens", nlohmann::json::array()},
                       {"completed", nlohmann::json::array()}, {"errors", nlohmann::json::array()},
                       {"concurrency", nlohmann::json::array()}};
  for (const auto& b : m.timeline) {
    tl["t"].push_back(b.t);
    tl["output_tokens"].push_back(b.output_tokens);
    tl["completed"].push_back(b.completed);
    tl["errors"].push_back(b.errors);
    tl["concurrency"].push_back(b.concurrency);
  }
  j["timeline"] = tl;
  if (per_request) {
    nlohmann::json rq = {{"send_s", nlohmann::json::array()}, {"ttft_ms", nlohmann::json::array()},
                         {"tpot_ms", nlohmann::json::array()}, {"e2el_ms", nlohmann::json::array()},
                         {"prompt_tokens", nlohmann::json::array()}, {"output_tokens", nlohmann::json::array()},
                         {"phase", nlohmann::json::array()}, {"error", nlohmann::json::array()}};
    for (const auto& r : run.requests) {
      rq["send_s"].push_back(r.send_s);
      rq["ttft_ms"].push_back(r.ttft_s * 1000.0);
      rq["tpot_ms"].push_back(request_tpot_ms(r));
      rq["e2el_ms"].push_back(r.e2el_s * 1000.0);
      rq["prompt_tokens"].push_back(r.prompt_tokens);
      rq["output_tokens"].push_back(r.output_tokens);
      rq["phase"].push_back(r.phase);
      rq["error"].push_back(r.success ? std::string() : failure_label(r.failure, r.http_status));
    }
    j["requests"] = rq;
  }
  return j;
}

nlohmann::json report_to_json(const BenchReport& rep) {
  nlohmann::json j;
  j["tool"] = "tokenmill bench serve";
  j["version"] = rep.tool_version;
  j["base_url"] = rep.base_url;
  j["model"] = rep.model;
  j["endpoint"] = rep.endpoint;
  j["scenario"] = rep.scenario;
  j["started_at"] = rep.started_at;
  j["finished_at"] = rep.finished_at;
  j["duration_s"] = rep.duration_s;
  j["max_model_len"] = rep.max_model_len;
  j["parameters"] = rep.parameters;
  j["scenarios"] = nlohmann::json::array();
  size_t total_runs = 0;
  const ScenarioResult* only = nullptr;
  for (const auto& sr : rep.scenarios) {
    nlohmann::json s = {{"name", sr.name}, {"title", sr.title}, {"status", sr.status},
                        {"verdict", sr.verdict}, {"details", sr.details}, {"runs", nlohmann::json::array()}};
    for (size_t i = 0; i < sr.runs.size(); ++i) s["runs"].push_back(run_to_json(sr.runs[i], sr.metrics[i]));
    total_runs += sr.runs.size();
    if (!sr.runs.empty()) only = &sr;
    j["scenarios"].push_back(std::move(s));
  }
  if (total_runs == 1 && only) {  // a single run: its figures at top level too
    auto r = run_to_json(only->runs[0], only->metrics[0], false);
    for (auto it = r.begin(); it != r.end(); ++it)
      if (it.key() != "timeline" && it.key() != "params") j[it.key()] = it.value();
  }
  nlohmann::json series = {{"t", nlohmann::json::array()}};
  for (const char* k : {"kv_cache_usage_perc", "num_requests_running", "num_requests_waiting", "num_preemptions_total"})
    series[k] = nlohmann::json::array();
  for (const auto& s : rep.metrics_series) {
    series["t"].push_back(s.t);
    for (const char* k : {"kv_cache_usage_perc", "num_requests_running", "num_requests_waiting", "num_preemptions_total"}) {
      auto it = s.values.find(k);
      series[k].push_back(it == s.values.end() ? nlohmann::json(nullptr) : nlohmann::json(it->second));
    }
  }
  j["metrics"] = {{"available", rep.metrics_available}, {"series", series}};
  return j;
}

Status write_reports(const BenchReport& rep, const BenchOptions& opts) {
  if (opts.json_path.empty() && opts.report_path.empty()) return ok_status();
  nlohmann::json j = report_to_json(rep);
  if (!opts.json_path.empty()) {
    std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    TM_TRY(write_file(opts.json_path, text.data(), text.size()));
  }
  if (!opts.report_path.empty()) {
    std::string html = render_html_report(j);
    TM_TRY(write_file(opts.report_path, html.data(), html.size()));
  }
  return ok_status();
}

}  // namespace tmill::loadgen
