#include "loadgen/arrivals.h"

#include <cmath>
#include <random>

namespace tmill::loadgen {

double sample_gap(std::mt19937_64& rng, double rate, double burstiness) {
  if (!(rate > 0) || std::isinf(rate)) return 0.0;
  if (std::isinf(burstiness)) return 1.0 / rate;
  std::gamma_distribution<double> gamma(burstiness, 1.0 / (rate * burstiness));
  return gamma(rng);
}

std::vector<double> arrival_times(size_t n, const ArrivalConfig& cfg) {
  std::vector<double> t(n, 0.0);
  if (n == 0 || !(cfg.rate > 0) || std::isinf(cfg.rate)) return t;
  std::mt19937_64 rng(cfg.seed);
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += sample_gap(rng, cfg.rate, cfg.burstiness);
    t[i] = acc;
  }
  if (cfg.normalize && acc > 0) {
    const double scale = (static_cast<double>(n) / cfg.rate) / acc;
    for (auto& x : t) x *= scale;
  }
  return t;
}

}  // namespace tmill::loadgen
