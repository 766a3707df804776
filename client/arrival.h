// When the open-loop load generator sends its next request.
#pragma once
#include <cstdint>
#include <random>

namespace flashserve::bench {

// Gaps between arrivals at `rate` requests/s. burstiness 1 is a Poisson process; below 1 the
// arrivals bunch up, above 1 they even out. The gaps are gamma-distributed with shape =
// burstiness and mean 1 / rate, so the long-run rate is the same for any burstiness.
class ArrivalProcess {
 public:
  // rate = +inf sends everything at once. Throws std::invalid_argument on rate or burstiness <= 0.
  ArrivalProcess(double rate, double burstiness, uint64_t seed);

  double next_gap_s();  // seconds until the next arrival
  bool unbounded() const { return unbounded_; }

 private:
  bool unbounded_;
  std::mt19937_64 rng_;
  std::gamma_distribution<double> gap_;
};

}  // namespace flashserve::bench
