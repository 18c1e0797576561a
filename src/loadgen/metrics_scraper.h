// Polls a server's Prometheus endpoint (GET /metrics) during a benchmark and keeps a time series of
// the serving gauges/counters vLLM defines (tokenmill exports the same names):
//   vllm:kv_cache_usage_perc (0..1; older vLLM: vllm:gpu_cache_usage_perc), vllm:num_requests_running,
//   vllm:num_requests_waiting, vllm:num_preemptions_total (counter).
// A server without /metrics is fine: available() stays false.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "loadgen/client.h"

namespace tmill::loadgen {

// Series keys used in the report.
inline constexpr const char* kKvUsage = "kv_cache_usage_perc";
inline constexpr const char* kRunning = "num_requests_running";
inline constexpr const char* kWaiting = "num_requests_waiting";
inline constexpr const char* kPreemptions = "num_preemptions_total";

// Parses Prometheus text exposition format into name -> value, adding up the samples of one metric
// name across label sets (several engines/models); names ending in "_perc" take the maximum instead.
// Comments are skipped; unparsable lines are ignored.
std::map<std::string, double> parse_prometheus_text(std::string_view text);
// The four serving series (keys above) from a parsed exposition; missing ones are absent.
std::map<std::string, double> extract_serving_metrics(const std::map<std::string, double>& all);

struct MetricsSample {
  double t = 0;  // seconds since the benchmark started
  std::map<std::string, double> values;
};

class MetricsScraper {
 public:
  MetricsScraper(const ServerUrl& url, std::string api_key, double interval_s,
                 std::chrono::steady_clock::time_point t0);
  ~MetricsScraper();
  // Probes /metrics once; starts the polling thread when it answers with the series.
  void start();
  void stop();
  // Scrapes right now (outside the polling schedule) and records the sample; false if unavailable.
  bool scrape_now(MetricsSample* out = nullptr);

  bool available() const { return available_; }
  std::vector<MetricsSample> samples() const;

 private:
  void loop();

  ServerUrl url_;
  std::string api_key_;
  double interval_s_;
  std::chrono::steady_clock::time_point t0_;
  std::atomic<bool> available_{false};
  bool stopping_ = false;
  mutable std::mutex mu_;
  std::mutex scrape_mu_;
  std::condition_variable cv_;
  std::vector<MetricsSample> samples_;
  std::unique_ptr<OpenAiClient> client_;
  std::thread thread_;
};

}  // namespace tmill::loadgen
