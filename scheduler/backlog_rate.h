// How fast the server starts queued requests while it has a queue: the rate at which it works a
// backlog off, measured over recent busy steps only (an idle server starts requests as fast as they
// come, which says nothing about its capacity). Admission divides the queue ahead of a new request
// by this rate to predict its wait, and refuses at once what would wait past --max-queue-time:
// under overload a 429 now beats a request that starts too late to be of use.
#pragma once
#include <cstdint>

namespace flashserve {

class BacklogRate {
 public:
  // A step of `seconds` that started `started` requests, taken while some were waiting.
  void observe(double seconds, int32_t started);
  // Seconds until the last of `queued` waiting requests would start; 0 until enough backlog has
  // been seen to say (kMinObservedSeconds).
  double predicted_wait(int32_t queued) const;

  // Below this much recent busy time the rate is not trusted.
  static constexpr double kMinObservedSeconds = 2.0;

 private:
  // Sums over busy time, decayed with a half-life of 20 s of it.
  double busy_seconds_ = 0;
  double started_ = 0;
};

}  // namespace flashserve
