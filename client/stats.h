// Per-request measurements and the summary a benchmark run prints: throughput, latency
// percentiles, goodput against SLOs, errors by kind.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace flashserve::bench {

enum class ErrorKind { None, Connect, HttpStatus, Timeout, Stream, Other };
const char* to_string(ErrorKind kind);

struct RequestResult {
  ErrorKind error = ErrorKind::None;
  std::string error_detail;  // e.g. the HTTP status and body, for the first failures in a log
  std::string error_name;    // set: counted under this name in the report (gRPC status codes)
  double ttft_s = 0.0;       // send -> first content chunk
  double e2e_s = 0.0;        // send -> end of stream
  std::vector<double> itl_s; // gaps between consecutive content chunks
  int32_t output_tokens = 0;
  int32_t input_len = 0;
  double sent_s = 0.0;       // when it was sent, after the run's start
  bool ok() const { return error == ErrorKind::None; }
  // (e2e - ttft) / (output_tokens - 1); 0 for a single-token output.
  double tpot_s() const;
};

// Times the content-bearing pieces of a streamed response (SSE chunks, gRPC messages) as they
// arrive, in seconds after sending: the first sets TTFT, each later one adds an inter-token latency.
class ContentTimer {
 public:
  void on_content(double t_s, RequestResult& result) {
    if (count_ == 0) {
      result.ttft_s = t_s;
    } else {
      result.itl_s.push_back(t_s - last_s_);
    }
    last_s_ = t_s;
    ++count_;
  }
  int32_t count() const { return count_; }

 private:
  double last_s_ = 0.0;
  int32_t count_ = 0;
};

struct Slo {
  double ttft_ms = 0.0;  // 0: not checked
  double tpot_ms = 0.0;
};

struct LatencySummary {
  double mean_ms = 0, median_ms = 0, p90_ms = 0, p99_ms = 0;
};

struct Report {
  double duration_s = 0.0;
  int32_t num_requests = 0, num_ok = 0;
  int64_t total_input_len = 0, total_output_tokens = 0;
  double request_throughput = 0.0;  // successful requests / s
  double output_throughput = 0.0;   // output tokens / s
  double goodput = 0.0;             // requests / s meeting every SLO that is set
  LatencySummary ttft, itl, tpot, e2e;
  std::map<std::string, int32_t> errors;  // kind -> count
};

// Linear interpolation between closest ranks (numpy's default); 0 for no samples. p in [0, 100].
double percentile(std::vector<double> samples, double p);
LatencySummary summarize_ms(const std::vector<double>& samples_s);

Report make_report(const std::vector<RequestResult>& results, double duration_s, const Slo& slo);
std::string format_table(const Report& report);
nlohmann::json to_json(const Report& report);
// One report per `interval_s` of sending, by when each request was sent (its goodput over the
// interval's length): how a long run changed over time. Each has "start_s".
nlohmann::json interval_reports(const std::vector<RequestResult>& results, double interval_s, const Slo& slo);

}  // namespace flashserve::bench
