#include "client/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace flashserve::bench {

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::None: return "none";
    case ErrorKind::Connect: return "connect";
    case ErrorKind::HttpStatus: return "http_status";
    case ErrorKind::Timeout: return "timeout";
    case ErrorKind::Stream: return "stream";
    case ErrorKind::Other: return "other";
  }
  return "other";
}

double RequestResult::tpot_s() const {
  return output_tokens > 1 ? (e2e_s - ttft_s) / double(output_tokens - 1) : 0.0;
}

double percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(samples.size() - 1);
  const auto lo = size_t(std::floor(rank));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  return samples[lo] + (samples[hi] - samples[lo]) * (rank - double(lo));
}

LatencySummary summarize_ms(const std::vector<double>& samples_s) {
  if (samples_s.empty()) return {};
  std::vector<double> ms(samples_s.size());
  std::transform(samples_s.begin(), samples_s.end(), ms.begin(), [](double s) { return s * 1e3; });
  const double mean = std::accumulate(ms.begin(), ms.end(), 0.0) / double(ms.size());
  return {mean, percentile(ms, 50), percentile(ms, 90), percentile(ms, 99)};
}

namespace {

bool meets(const RequestResult& r, const Slo& slo) {
  if (slo.ttft_ms > 0 && r.ttft_s * 1e3 > slo.ttft_ms) return false;
  if (slo.tpot_ms > 0 && r.tpot_s() * 1e3 > slo.tpot_ms) return false;
  return true;
}

}  // namespace

Report make_report(const std::vector<RequestResult>& results, double duration_s, const Slo& slo) {
  Report rep;
  rep.duration_s = duration_s;
  rep.num_requests = int32_t(results.size());
  std::vector<double> ttft, itl, tpot, e2e;
  int32_t num_good = 0;
  for (const RequestResult& r : results) {
    if (!r.ok()) {
      ++rep.errors[r.error_name.empty() ? std::string(to_string(r.error)) : r.error_name];
      continue;
    }
    ++rep.num_ok;
    rep.total_input_len += r.input_len;
    rep.total_output_tokens += r.output_tokens;
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    // A one-token output has no per-token time; leaving it out keeps TPOT from reading 0.
    if (r.output_tokens > 1) tpot.push_back(r.tpot_s());
    num_good += meets(r, slo);
  }
  if (duration_s > 0) {
    rep.request_throughput = rep.num_ok / duration_s;
    rep.output_throughput = double(rep.total_output_tokens) / duration_s;
    rep.goodput = num_good / duration_s;
  }
  rep.ttft = summarize_ms(ttft);
  rep.itl = summarize_ms(itl);
  rep.tpot = summarize_ms(tpot);
  rep.e2e = summarize_ms(e2e);
  return rep;
}

nlohmann::json interval_reports(const std::vector<RequestResult>& results, double interval_s, const Slo& slo) {
  std::vector<std::vector<RequestResult>> buckets;
  for (const RequestResult& r : results) {
    const size_t b = size_t(std::max(0.0, r.sent_s) / interval_s);
    if (b >= buckets.size()) buckets.resize(b + 1);
    buckets[b].push_back(r);
  }
  nlohmann::json out = nlohmann::json::array();
  for (size_t b = 0; b < buckets.size(); ++b) {
    nlohmann::json j = to_json(make_report(buckets[b], interval_s, slo));
    j["start_s"] = double(b) * interval_s;
    out.push_back(std::move(j));
  }
  return out;
}

namespace {

std::string line(const char* label, const std::string& value) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%-34s %14s\n", label, value.c_str());
  return buf;
}

std::string num(double v, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

std::string latency_rows(const char* name, const LatencySummary& s) {
  const std::string n = name;
  return line(("Mean " + n + " (ms):").c_str(), num(s.mean_ms)) +
         line(("Median " + n + " (ms):").c_str(), num(s.median_ms)) +
         line(("P90 " + n + " (ms):").c_str(), num(s.p90_ms)) + line(("P99 " + n + " (ms):").c_str(), num(s.p99_ms));
}

nlohmann::json latency_json(const LatencySummary& s) {
  return {{"mean_ms", s.mean_ms}, {"median_ms", s.median_ms}, {"p90_ms", s.p90_ms}, {"p99_ms", s.p99_ms}};
}

}  // namespace

std::string format_table(const Report& r) {
  std::string out = "============ Serving Benchmark Result ============\n";
  out += line("Successful requests:", std::to_string(r.num_ok));
  out += line("Failed requests:", std::to_string(r.num_requests - r.num_ok));
  for (const auto& [kind, count] : r.errors) out += line(("  errors (" + kind + "):").c_str(), std::to_string(count));
  out += line("Benchmark duration (s):", num(r.duration_s));
  out += line("Total input words:", std::to_string(r.total_input_len));
  out += line("Total output tokens:", std::to_string(r.total_output_tokens));
  out += line("Request throughput (req/s):", num(r.request_throughput));
  out += line("Output token throughput (tok/s):", num(r.output_throughput));
  out += line("Goodput (req/s):", num(r.goodput));
  out += "---------------- Time to First Token -------------\n" + latency_rows("TTFT", r.ttft);
  out += "------ Time per Output Token (excl. 1st token) ---\n" + latency_rows("TPOT", r.tpot);
  out += "---------------- Inter-token Latency -------------\n" + latency_rows("ITL", r.itl);
  out += "---------------- End-to-end Latency --------------\n" + latency_rows("E2E", r.e2e);
  out += "==================================================\n";
  return out;
}

nlohmann::json to_json(const Report& r) {
  return {{"duration_s", r.duration_s},
          {"num_requests", r.num_requests},
          {"num_ok", r.num_ok},
          {"total_input_len", r.total_input_len},
          {"total_output_tokens", r.total_output_tokens},
          {"request_throughput", r.request_throughput},
          {"output_throughput", r.output_throughput},
          {"goodput", r.goodput},
          {"ttft", latency_json(r.ttft)},
          {"tpot", latency_json(r.tpot)},
          {"itl", latency_json(r.itl)},
          {"e2e", latency_json(r.e2e)},
          {"errors", r.errors}};
}

}  // namespace flashserve::bench
