#include "client/sweep.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace flashserve::bench {

std::vector<double> parse_rates(const std::string& list) {
  std::vector<double> rates;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    double rate = 0.0;
    size_t used = 0;
    try {
      rate = std::stod(item, &used);  // accepts "inf"
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || !(rate > 0.0)) {
      throw std::invalid_argument("--sweep-rates: expected positive numbers or inf, got '" + item + "'");
    }
    rates.push_back(rate);
  }
  if (rates.empty()) throw std::invalid_argument("--sweep-rates: empty list");
  return rates;
}

std::vector<SweepRow> run_rate_sweep(Backend& backend, const std::vector<BenchRequest>& requests,
                                     const std::vector<double>& rates, const RunOptions& base, const Slo& slo) {
  std::vector<SweepRow> rows;
  for (const double rate : rates) {
    std::fprintf(stderr, "sweep: rate %s req/s\n", format_rate(rate).c_str());
    RunOptions options = base;
    options.request_rate = rate;
    options.concurrency = 0;  // a sweep is open loop by definition
    const RunResult run = run_benchmark(backend, requests, options);
    log_first_errors(run.results);
    rows.push_back({rate, make_report(run.results, run.duration_s, slo)});
  }
  return rows;
}

std::string format_rate(double rate) {
  if (std::isinf(rate)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", rate);
  return buf;
}

std::string format_sweep_table(const std::vector<SweepRow>& rows) {
  char buf[256];
  constexpr const char* kRow = "%8s %9s %11s %10s %10s %10s %10s %10s %7s\n";
  std::snprintf(buf, sizeof(buf), kRow, "rate", "req/s", "out tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99",
                "E2E p50", "errors");
  std::string out = "============================ Rate Sweep (latencies in ms) ============================\n";
  out += buf;
  for (const SweepRow& row : rows) {
    const Report& r = row.report;
    std::snprintf(buf, sizeof(buf), "%8s %9.2f %11.1f %10.2f %10.2f %10.2f %10.2f %10.2f %7d\n",
                  format_rate(row.rate).c_str(), r.request_throughput, r.output_throughput, r.ttft.median_ms,
                  r.ttft.p99_ms, r.tpot.median_ms, r.tpot.p99_ms, r.e2e.median_ms, r.num_requests - r.num_ok);
    out += buf;
  }
  out += "======================================================================================\n";
  return out;
}

nlohmann::json sweep_json(const std::vector<SweepRow>& rows) {
  nlohmann::json array = nlohmann::json::array();
  for (const SweepRow& row : rows) {
    nlohmann::json j = to_json(row.report);
    j["request_rate"] = std::isinf(row.rate) ? nlohmann::json("inf") : nlohmann::json(row.rate);
    array.push_back(std::move(j));
  }
  return array;
}

}  // namespace flashserve::bench
