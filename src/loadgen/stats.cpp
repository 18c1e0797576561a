#include "loadgen/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/strings.h"

namespace tmill::loadgen {

double percentile_sorted(const std::vector<double>& a, double p) {
  if (a.empty()) return 0.0;
  if (a.size() == 1) return a[0];
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * static_cast<double>(a.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, a.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return a[lo] + (a[hi] - a[lo]) * frac;
}

Summary summarize(std::vector<double> v) {
  Summary s;
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  double sq = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / static_cast<double>(v.size()));
  s.p50 = percentile_sorted(v, 50);
  s.p90 = percentile_sorted(v, 90);
  s.p95 = percentile_sorted(v, 95);
  s.p99 = percentile_sorted(v, 99);
  s.max = v.back();
  s.min = v.front();
  return s;
}

Result<SloConfig> parse_slo(const std::vector<std::string>& items) {
  SloConfig slo;
  for (const auto& item : items) {
    for (const auto& tok : split(item, ' ')) {
      if (tok.empty()) continue;
      auto colon = tok.find(':');
      if (colon == std::string::npos) return Error{"goodput item '" + tok + "' is not NAME:MS"};
      std::string name = tok.substr(0, colon), val = tok.substr(colon + 1);
      char* end = nullptr;
      double ms = std::strtod(val.c_str(), &end);
      if (val.empty() || end != val.c_str() + val.size() || !(ms > 0) || !std::isfinite(ms))
        return Error{"goodput item '" + tok + "': expected a positive number of milliseconds"};
      if (name == "ttft") slo.ttft_ms = ms;
      else if (name == "tpot") slo.tpot_ms = ms;
      else if (name == "e2el") slo.e2el_ms = ms;
      else return Error{"goodput metric '" + name + "' is not one of ttft, tpot, e2el"};
    }
  }
  return slo;
}

size_t count_good(const std::vector<LatencySample>& samples, const SloConfig& slo) {
  if (!slo.any()) return 0;
  size_t good = 0;
  for (const auto& s : samples) {
    if (slo.ttft_ms && s.ttft_ms > *slo.ttft_ms) continue;
    if (slo.tpot_ms && s.tpot_ms > *slo.tpot_ms) continue;
    if (slo.e2el_ms && s.e2el_ms > *slo.e2el_ms) continue;
    ++good;
  }
  return good;
}

}  // namespace tmill::loadgen
