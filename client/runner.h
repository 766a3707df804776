// Drives a backend with a list of requests, open loop (arrivals at a rate, whatever the server's
// pace) or closed loop (a fixed number of requests in flight), and collects the results.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "client/backend.h"

namespace flashserve::bench {

struct RunOptions {
  double request_rate = std::numeric_limits<double>::infinity();  // open loop, requests/s; inf sends all at once
  double burstiness = 1.0;          // shape of the gamma inter-arrival gaps (1 = Poisson)
  int32_t concurrency = 0;          // > 0: closed loop with this many in flight, rate ignored
  double duration_s = 0.0;          // > 0: send nothing new after this long
  uint64_t seed = 0;
  bool show_progress = false;       // a one-line progress bar on stderr
};

struct RunResult {
  std::vector<RequestResult> results;  // one per request sent, in workload order
  double duration_s = 0.0;             // first send to last completion
};

// Ends once every request is sent (or the duration is up) and each sent one has finished, which
// the backend's own timeout bounds.
RunResult run_benchmark(Backend& backend, const std::vector<BenchRequest>& requests, const RunOptions& options);

// The first three failures, with their details, on stderr: enough to see why without a flood.
void log_first_errors(const std::vector<RequestResult>& results);

}  // namespace flashserve::bench
