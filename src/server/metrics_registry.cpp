#include "server/metrics_registry.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/log.h"

namespace tmill::server {

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  TM_ASSERT(std::is_sorted(bounds_.begin(), bounds_.end()));
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  counts_[i]++;  // bucket i: bounds_[i-1] < v <= bounds_[i] ("le" semantics)
  sum_ += v;
  count_++;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t acc = 0;
  for (uint64_t c : counts_) s.cumulative.push_back(acc += c);
  s.sum = sum_;
  s.count = count_;
  return s;
}

bool valid_metric_name(std::string_view n) {
  if (n.empty()) return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool valid_label_name(std::string_view n) {
  if (n.empty() || n.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_metric_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

std::vector<double> buckets_1_2_5(double max) {
  std::vector<double> b;
  for (double m = 1; b.empty() || b.back() < max; m *= 10)
    for (double k : {1.0, 2.0, 5.0}) {
      b.push_back(k * m);
      if (b.back() >= max) break;
    }
  return b;
}

MetricsRegistry::Series& MetricsRegistry::series(const std::string& name, const std::string& help, Type type,
                                                 const Labels& labels) {
  TM_ASSERT(valid_metric_name(name));
  for (const auto& [k, v] : labels) TM_ASSERT(valid_label_name(k) && k != "le");
  std::lock_guard<std::mutex> lock(mu_);
  Family* f = nullptr;
  if (auto it = by_name_.find(name); it != by_name_.end()) {
    f = it->second;
    TM_ASSERT(f->type == type);
  } else {
    families_.push_back(std::make_unique<Family>());
    f = families_.back().get();
    f->name = name;
    f->help = help;
    f->type = type;
    by_name_[name] = f;
  }
  for (auto& s : f->series)
    if (s->labels == labels) return *s;
  f->series.push_back(std::make_unique<Series>());
  f->series.back()->labels = labels;
  return *f->series.back();
}

Gauge& MetricsRegistry::gauge_replacing(const std::string& name, const std::string& help, const Labels& labels,
                                       const std::string& key, const std::string& value) {
  Gauge& g = gauge(name, help, labels);
  std::lock_guard<std::mutex> lock(mu_);
  auto& all = by_name_.at(name)->series;
  std::erase_if(all, [&](const std::unique_ptr<Series>& s) {
    if (s->labels == labels) return false;
    for (const auto& [k, v] : s->labels)
      if (k == key && v == value) return true;
    return false;
  });
  return g;
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  Series& s = series(name, help, Type::Counter, labels);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.counter) s.counter = std::make_unique<Counter>();
  return *s.counter;
}

Gauge& MetricsRegistry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  Series& s = series(name, help, Type::Gauge, labels);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.gauge) s.gauge = std::make_unique<Gauge>();
  return *s.gauge;
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      const std::vector<double>& buckets, const Labels& labels) {
  Series& s = series(name, help, Type::Histogram, labels);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.histogram) s.histogram = std::make_unique<Histogram>(buckets);
  return *s.histogram;
}

void MetricsRegistry::add_collector(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  collectors_.push_back(std::move(fn));
}

namespace {

std::string label_text(const Labels& labels, const std::string& le = {}) {
  if (labels.empty() && le.empty()) return {};
  std::string s = "{";
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first) s += ",";
    s += k + "=\"" + escape_label_value(v) + "\"";
    first = false;
  }
  if (!le.empty()) s += std::string(first ? "" : ",") + "le=\"" + le + "\"";
  return s + "}";
}

}  // namespace

std::string MetricsRegistry::render() {
  std::vector<std::function<void()>> collectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    collectors = collectors_;
  }
  for (auto& c : collectors) c();
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out.reserve(16384);
  for (const auto& f : families_) {
    const char* type = f->type == Type::Counter ? "counter" : f->type == Type::Gauge ? "gauge" : "histogram";
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", f->name, escape_help(f->help), f->name, type);
    for (const auto& s : f->series) {
      if (f->type == Type::Counter) {
        out += f->name + label_text(s->labels) + " " + format_metric_value(s->counter->value()) + "\n";
      } else if (f->type == Type::Gauge) {
        out += f->name + label_text(s->labels) + " " + format_metric_value(s->gauge->value()) + "\n";
      } else {
        const Histogram::Snapshot h = s->histogram->snapshot();
        for (size_t i = 0; i <= h.bounds.size(); ++i) {
          const std::string le = i < h.bounds.size() ? format_metric_value(h.bounds[i]) : "+Inf";
          out += f->name + "_bucket" + label_text(s->labels, le) + " " + std::to_string(h.cumulative[i]) + "\n";
        }
        out += f->name + "_sum" + label_text(s->labels) + " " + format_metric_value(h.sum) + "\n";
        out += f->name + "_count" + label_text(s->labels) + " " + std::to_string(h.count) + "\n";
      }
    }
  }
  return out;
}

}  // namespace tmill::server
