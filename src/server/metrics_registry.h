// A small Prometheus metrics registry: counters, gauges and histograms with labels, rendered in the
// text exposition format 0.0.4:
//
//   # HELP vllm:e2e_request_latency_seconds Histogram of end-to-end request latency in seconds.
//   # TYPE vllm:e2e_request_latency_seconds histogram
//   vllm:e2e_request_latency_seconds_bucket{model_name="m",le="0.5"} 3
//   ...
//   vllm:e2e_request_latency_seconds_bucket{model_name="m",le="+Inf"} 7
//   vllm:e2e_request_latency_seconds_sum{model_name="m"} 4.25
//   vllm:e2e_request_latency_seconds_count{model_name="m"} 7
//
// Series are created once (registration takes a lock) and then updated lock-free (counters, gauges)
// or under a per-histogram mutex; references stay valid for the registry's lifetime.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tmill::server {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(double v = 1.0) { v_.fetch_add(v, std::memory_order_relaxed); }
  // For totals kept elsewhere (e.g. the engine's token counters), copied in by a collector.
  void set(double v) { v_.store(v, std::memory_order_relaxed); }
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0.0};
};

class Gauge {
 public:
  void set(double v) { v_.store(v, std::memory_order_relaxed); }
  void inc(double v = 1.0) { v_.fetch_add(v, std::memory_order_relaxed); }
  void dec(double v = 1.0) { v_.fetch_sub(v, std::memory_order_relaxed); }
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0.0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // sorted, finite; +Inf is implicit
  void observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class MetricsRegistry {
 public:
  // Returns the series of `name` with exactly these labels, creating family and series on first use.
  // A name must keep one type and help text.
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const std::vector<double>& buckets,
                       const Labels& labels = {});

  // An info-style gauge whose labels change (vLLM's lora_requests_info): the series with these
  // labels, after dropping the family's other series that share the label `key`=`value` (so one
  // series per model remains). Only for families nothing else holds references into.
  Gauge& gauge_replacing(const std::string& name, const std::string& help, const Labels& labels,
                         const std::string& key, const std::string& value);

  // Called at the start of every render() (e.g. to copy engine stats into gauges).
  void add_collector(std::function<void()> fn);

  std::string render();

 private:
  enum class Type { Counter, Gauge, Histogram };
  struct Series {
    Labels labels;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  struct Family {
    std::string name, help;
    Type type;
    std::vector<std::unique_ptr<Series>> series;
  };
  Series& series(const std::string& name, const std::string& help, Type type, const Labels& labels);

  std::mutex mu_;
  std::vector<std::unique_ptr<Family>> families_;  // registration order
  std::map<std::string, Family*> by_name_;
  std::vector<std::function<void()>> collectors_;
};

// Exposition helpers (exposed for tests).
bool valid_metric_name(std::string_view name);  // [a-zA-Z_:][a-zA-Z0-9_:]*
bool valid_label_name(std::string_view name);   // [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__"
std::string escape_label_value(std::string_view v);  // \\ \" \n
std::string escape_help(std::string_view v);         // \\ \n
std::string format_metric_value(double v);           // shortest round-trip, "+Inf", "-Inf", "NaN"
// 1, 2, 5, 10, 20, 50, ... up to and including the first value >= max (vLLM's build_1_2_5_buckets).
std::vector<double> buckets_1_2_5(double max);

}  // namespace tmill::server
