#include "client/arrival.h"

#include <cmath>
#include <stdexcept>

namespace flashserve::bench {

ArrivalProcess::ArrivalProcess(double rate, double burstiness, uint64_t seed)
    : unbounded_(std::isinf(rate)), rng_(seed) {
  if (!(rate > 0.0)) throw std::invalid_argument("request rate must be positive");
  if (!(burstiness > 0.0)) throw std::invalid_argument("burstiness must be positive");
  if (!unbounded_) gap_ = std::gamma_distribution<double>(burstiness, 1.0 / (rate * burstiness));
}

double ArrivalProcess::next_gap_s() { return unbounded_ ? 0.0 : gap_(rng_); }

}  // namespace flashserve::bench
