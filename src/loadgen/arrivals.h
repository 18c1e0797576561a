// Request arrival times for a target rate: a Poisson process (burstiness 1) or, generally,
// gamma-distributed inter-arrival gaps with shape = burstiness and scale = 1/(rate*burstiness), so
// the mean gap stays 1/rate while burstiness < 1 clusters arrivals and > 1 evens them out
// (vLLM's --burstiness). rate = inf sends everything at t=0; burstiness = inf gives fixed gaps.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tmill::loadgen {

struct ArrivalConfig {
  double rate = 0;        // requests/s; <= 0 or inf: all at once
  double burstiness = 1;  // gamma shape; inf: constant spacing
  uint64_t seed = 0;
  // Rescale the cumulative times so the last arrival lands exactly at n/rate (vLLM does this to
  // make throughput comparable across seeds). Off to study the raw process.
  bool normalize = true;
};

// One inter-arrival gap (seconds) of the process above; 0 when rate is inf.
double sample_gap(std::mt19937_64& rng, double rate, double burstiness);

// Offsets (seconds from the run start) at which each of `n` requests is sent; non-decreasing.
std::vector<double> arrival_times(size_t n, const ArrivalConfig& cfg);

}  // namespace tmill::loadgen
