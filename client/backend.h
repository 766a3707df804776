// How the load generator talks to a server: one blocking call per request, safe to call from
// many threads at once.
#pragma once
#include "client/stats.h"
#include "client/workload.h"

namespace flashserve::bench {

class Backend {
 public:
  virtual ~Backend() = default;
  // Never throws: every failure comes back as a result with its error kind.
  virtual RequestResult send(const BenchRequest& request) = 0;
};

}  // namespace flashserve::bench
