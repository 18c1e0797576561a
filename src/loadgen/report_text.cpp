// Plain-text summary for stdout, in the layout of `vllm bench serve`'s result block; multi-run
// scenarios (sweeps) get one compact row per run, and every scenario ends with its verdict.
#include <fmt/format.h>

#include "loadgen/loadgen.h"

namespace tmill::loadgen {

namespace {

void line(std::string& o, const std::string& k, const std::string& v) { o += fmt::format("{:<40} {:<10}\n", k, v); }
std::string f2(double v) { return fmt::format("{:.2f}", v); }
std::string header(const std::string& title, char fill) {
  std::string t = " " + title + " ";
  size_t w = 50, left = t.size() < w ? (w - t.size()) / 2 : 0, right = t.size() < w ? w - t.size() - left : 0;
  return std::string(left, fill) + t + std::string(right, fill) + "\n";
}

void full_block(std::string& o, const RunResult& run, const RunMetrics& m) {
  o += header("Serving Benchmark Result", '=');
  line(o, "Run:", run.label);
  line(o, "Successful requests:", std::to_string(m.completed));
  line(o, "Failed requests:", std::to_string(m.failed));
  for (const auto& [k, v] : m.failures) line(o, "  " + k + ":", std::to_string(v));
  if (run.params.contains("max_concurrency") && run.params["max_concurrency"].is_number())
    line(o, "Maximum request concurrency:", std::to_string(run.params["max_concurrency"].get<int>()));
  if (run.params.contains("request_rate") && run.params["request_rate"].is_number())
    line(o, "Request rate configured (RPS):", f2(run.params["request_rate"].get<double>()));
  line(o, "Benchmark duration (s):", f2(m.duration_s));
  line(o, "Total input tokens:", std::to_string(m.input_tokens));
  line(o, "Total generated tokens:", std::to_string(m.output_tokens));
  if (m.usage_missing) line(o, "Requests without usage (estimated):", std::to_string(m.usage_missing));
  line(o, "Request throughput (req/s):", f2(m.request_throughput));
  if (m.goodput_enabled) line(o, "Request goodput (req/s):", f2(m.request_goodput));
  line(o, "Output token throughput (tok/s):", f2(m.output_throughput));
  line(o, "Peak output token throughput (tok/s):", f2(m.max_output_tokens_per_s));
  line(o, "Peak concurrent requests:", std::to_string(m.peak_concurrency));
  line(o, "Total Token throughput (tok/s):", f2(m.total_token_throughput));
  auto section = [&](const char* title, const char* name, const Summary& s) {
    o += header(title, '-');
    line(o, fmt::format("Mean {} (ms):", name), f2(s.mean));
    line(o, fmt::format("Median {} (ms):", name), f2(s.p50));
    line(o, fmt::format("P90 {} (ms):", name), f2(s.p90));
    line(o, fmt::format("P99 {} (ms):", name), f2(s.p99));
    line(o, fmt::format("Max {} (ms):", name), f2(s.max));
  };
  section("Time to First Token", "TTFT", m.ttft_ms);
  section("Time per Output Token (excl. 1st token)", "TPOT", m.tpot_ms);
  section("Inter-token Latency", "ITL", m.itl_ms);
  section("End-to-end Latency", "E2EL", m.e2el_ms);
  o += std::string(50, '=') + "\n";
}

void compact_table(std::string& o, const ScenarioResult& sr) {
  o += fmt::format("{:<30} {:>9} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "run", "ok/fail", "req/s",
                   "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p50");
  for (size_t i = 0; i < sr.runs.size(); ++i) {
    const auto& m = sr.metrics[i];
    o += fmt::format("{:<30} {:>9} {:>8.2f} {:>10.1f} {:>9.1f} {:>9.1f} {:>9.2f} {:>9.2f} {:>9.1f}\n",
                     sr.runs[i].label.substr(0, 30), fmt::format("{}/{}", m.completed, m.failed),
                     m.request_throughput, m.output_throughput, m.ttft_ms.p50, m.ttft_ms.p99, m.tpot_ms.p50,
                     m.tpot_ms.p99, m.e2el_ms.p50);
  }
  o += "(latencies in ms)\n";
}

}  // namespace

std::string render_text_summary(const BenchReport& rep) {
  std::string o;
  o += fmt::format("tokenmill bench serve {} -> {} (model {}, {} endpoint)\n", rep.tool_version, rep.base_url,
                   rep.model, rep.endpoint);
  for (const auto& sr : rep.scenarios) {
    o += "\n";
    if (sr.name != "custom") o += header("Scenario: " + sr.name, '#');
    if (sr.runs.size() == 1) full_block(o, sr.runs[0], sr.metrics[0]);
    else if (!sr.runs.empty()) compact_table(o, sr);
    if (sr.name != "custom" || sr.status != "ok") o += fmt::format("Verdict [{}]: {}\n", sr.status, sr.verdict);
  }
  if (rep.scenarios.size() > 1) {
    o += "\n" + header("Verdicts", '=');
    for (const auto& sr : rep.scenarios) o += fmt::format("{:<13} [{}] {}\n", sr.name, sr.status, sr.verdict);
  }
  o += fmt::format("\n/metrics scraped: {} ({} samples); total time {:.1f} s\n",
                   rep.metrics_available ? "yes" : "no", rep.metrics_series.size(), rep.duration_s);
  return o;
}

}  // namespace tmill::loadgen
