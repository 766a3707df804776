// A rate sweep: the same workload run at several open-loop request rates, one after the other,
// summarized as one table (a row per rate) and one JSON array.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/runner.h"
#include "client/stats.h"

namespace flashserve::bench {

struct SweepRow {
  double rate = 0.0;  // requested rate, requests/s (+inf: all at once)
  Report report;
};

// "1,2,4,inf" -> {1, 2, 4, inf}. Throws std::invalid_argument on an empty list, a
// non-number or a rate <= 0.
std::vector<double> parse_rates(const std::string& list);

// Runs `requests` at each rate in turn (base's other options, seed included, unchanged), so rows
// differ only in load. Logs each run's first failures on stderr.
std::vector<SweepRow> run_rate_sweep(Backend& backend, const std::vector<BenchRequest>& requests,
                                     const std::vector<double>& rates, const RunOptions& base, const Slo& slo);

std::string format_rate(double rate);  // "inf" or the shortest decimal
std::string format_sweep_table(const std::vector<SweepRow>& rows);
// An array with each row's per-run report (as to_json) plus "request_rate" (a number, or "inf"
// since JSON has no infinity).
nlohmann::json sweep_json(const std::vector<SweepRow>& rows);

}  // namespace flashserve::bench
