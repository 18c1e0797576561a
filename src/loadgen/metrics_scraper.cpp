#include "loadgen/metrics_scraper.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace tmill::loadgen {

static bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}

std::map<std::string, double> parse_prometheus_text(std::string_view text) {
  std::map<std::string, double> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (line.empty() || line[0] == '#') continue;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ' && line[i] != '\t') ++i;
    std::string name(line.substr(0, i));
    if (name.empty()) continue;
    if (i < line.size() && line[i] == '{') {  // skip labels, honouring quotes and escapes
      bool in_quotes = false;
      for (++i; i < line.size(); ++i) {
        char c = line[i];
        if (in_quotes) {
          if (c == '\\') ++i;
          else if (c == '"') in_quotes = false;
        } else if (c == '"') {
          in_quotes = true;
        } else if (c == '}') {
          ++i;
          break;
        }
      }
    }
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t vend = i;
    while (vend < line.size() && line[vend] != ' ' && line[vend] != '\t') ++vend;
    std::string val(line.substr(i, vend - i));
    if (val.empty()) continue;
    char* end = nullptr;
    double v = std::strtod(val.c_str(), &end);
    if (end != val.c_str() + val.size() || std::isnan(v)) continue;
    auto [it, fresh] = out.emplace(name, v);
    if (!fresh) it->second = ends_with(name, "_perc") ? std::max(it->second, v) : it->second + v;
  }
  return out;
}

std::map<std::string, double> extract_serving_metrics(const std::map<std::string, double>& all) {
  std::map<std::string, double> m;
  auto take = [&](const char* key, std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (auto it = all.find(n); it != all.end()) {
        m[key] = it->second;
        return;
      }
  };
  take(kKvUsage, {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"});
  take(kRunning, {"vllm:num_requests_running"});
  take(kWaiting, {"vllm:num_requests_waiting"});
  take(kPreemptions, {"vllm:num_preemptions_total", "vllm:num_preemptions"});
  return m;
}

MetricsScraper::MetricsScraper(const ServerUrl& url, std::string api_key, double interval_s,
                               std::chrono::steady_clock::time_point t0)
    : url_(url), api_key_(std::move(api_key)), interval_s_(interval_s), t0_(t0) {}

MetricsScraper::~MetricsScraper() { stop(); }

bool MetricsScraper::scrape_now(MetricsSample* out) {
  std::lock_guard<std::mutex> g(scrape_mu_);
  if (!client_) client_ = std::make_unique<OpenAiClient>(url_, api_key_, 5.0);
  auto body = client_->get("/metrics", std::max(1.0, std::min(5.0, interval_s_ * 2)));
  if (!body) return false;
  auto m = extract_serving_metrics(parse_prometheus_text(*body));
  if (m.empty()) return false;
  MetricsSample s;
  s.t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  s.values = std::move(m);
  {
    std::lock_guard<std::mutex> lk(mu_);
    samples_.push_back(s);
  }
  available_ = true;
  if (out) *out = s;
  return true;
}

void MetricsScraper::start() {
  if (interval_s_ <= 0 || thread_.joinable()) return;
  if (!scrape_now()) return;
  thread_ = std::thread([this] { loop(); });
}

void MetricsScraper::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stopping_) {
    cv_.wait_for(lk, std::chrono::duration<double>(interval_s_), [&] { return stopping_; });
    if (stopping_) break;
    lk.unlock();
    scrape_now();  // a failed scrape (server busy) just leaves a gap
    lk.lock();
  }
}

void MetricsScraper::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<MetricsSample> MetricsScraper::samples() const {
  std::lock_guard<std::mutex> lk(mu_);
  return samples_;
}

}  // namespace tmill::loadgen
