#include "scheduler/backlog_rate.h"

#include <cmath>
#include <limits>

namespace flashserve {

// Recent enough to follow a machine getting busier, long enough to span many starts.
static constexpr double kHalfLifeSeconds = 20.0;

void BacklogRate::observe(double seconds, int32_t started) {
  if (!(seconds > 0) || !std::isfinite(seconds)) return;
  const double keep = std::exp2(-seconds / kHalfLifeSeconds);
  busy_seconds_ = keep * busy_seconds_ + seconds;
  started_ = keep * started_ + started;
}

double BacklogRate::predicted_wait(int32_t queued) const {
  if (queued <= 0 || busy_seconds_ < kMinObservedSeconds) return 0;
  // Nothing started in seconds of backlog: whatever queues now waits past any limit.
  if (started_ <= 0) return std::numeric_limits<double>::infinity();
  return queued * busy_seconds_ / started_;
}

}  // namespace flashserve
