// flashserve-bench: load-tests an OpenAI-compatible server with streamed completions and reports
// throughput, latency percentiles and goodput.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "client/http_backend.h"
#include "client/runner.h"

namespace fb = flashserve::bench;

namespace {

struct Args {
  fb::HttpOptions http;
  fb::WorkloadOptions workload;
  fb::RunOptions run;
  fb::Slo slo;
  std::string request_rate = "inf";
  int32_t warmup = 0;
  std::string json_path;
  bool no_progress = false;
};

void add_flags(CLI::App& app, Args& a) {
  app.add_option("--host", a.http.host, "Server host")->capture_default_str();
  app.add_option("--port", a.http.port, "Server HTTP port")->capture_default_str();
  app.add_option("--model", a.http.model, "Model name sent with each request");
  app.add_option("--timeout", a.http.timeout_s, "Per-request timeout, seconds")->capture_default_str();
  app.add_option("--num-requests", a.workload.num_requests, "Requests to measure")->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--input-len", a.workload.input_len, "Prompt length in words (~tokens)")->capture_default_str();
  app.add_option("--output-len", a.workload.output_len, "Tokens to generate")->capture_default_str();
  app.add_option("--range-ratio", a.workload.range_ratio, "Lengths uniform in len*(1 +- r)")->capture_default_str();
  app.add_option("--seed", a.workload.seed, "Seed for prompts, lengths and arrivals")->capture_default_str();
  app.add_option("--request-rate", a.request_rate, "Open-loop requests/s, or inf")->capture_default_str();
  app.add_option("--burstiness", a.run.burstiness, "Gamma shape of inter-arrival gaps (1 = Poisson)")
      ->capture_default_str();
  app.add_option("--concurrency", a.run.concurrency, "Closed loop: requests in flight (overrides the rate)");
  app.add_option("--duration", a.run.duration_s, "Send nothing new after this many seconds");
  app.add_option("--warmup", a.warmup, "Requests sent first and left out of the stats")->check(CLI::NonNegativeNumber);
  app.add_option("--slo-ttft-ms", a.slo.ttft_ms, "TTFT objective for goodput");
  app.add_option("--slo-tpot-ms", a.slo.tpot_ms, "TPOT objective for goodput");
  app.add_option("--json", a.json_path, "Also write the report as JSON here");
  app.add_flag("--no-progress", a.no_progress, "No progress bar on stderr");
}

// The warm-up requests share the measured run's shape but not its arrivals: they go out at the
// closed-loop concurrency (or all together) so the server is warm before the clock starts.
void warm_up(fb::Backend& backend, const std::vector<fb::BenchRequest>& requests, const Args& a) {
  if (requests.empty()) return;
  fb::RunOptions options;
  options.concurrency = a.run.concurrency > 0 ? a.run.concurrency : int32_t(requests.size());
  std::fprintf(stderr, "warming up with %zu requests\n", requests.size());
  fb::run_benchmark(backend, requests, options);
}

void log_first_errors(const std::vector<fb::RequestResult>& results) {
  int shown = 0;
  for (const auto& r : results) {
    if (r.ok() || shown++ >= 3) continue;
    std::fprintf(stderr, "request failed (%s): %s\n", fb::to_string(r.error), r.error_detail.c_str());
  }
}

int run(Args& a) {
  try {
    a.run.request_rate = std::stod(a.request_rate);  // accepts "inf"
  } catch (const std::exception&) {
    throw std::invalid_argument("--request-rate: expected a number or inf, got '" + a.request_rate + "'");
  }
  a.run.seed = a.workload.seed;
  a.run.show_progress = !a.no_progress;
  fb::WorkloadOptions wo = a.workload;
  wo.num_requests += a.warmup;
  std::vector<fb::BenchRequest> requests = fb::make_synthetic_workload(wo);
  const std::vector<fb::BenchRequest> warmup(requests.begin(), requests.begin() + a.warmup);
  requests.erase(requests.begin(), requests.begin() + a.warmup);

  fb::HttpBackend backend(a.http);
  warm_up(backend, warmup, a);
  const fb::RunResult result = fb::run_benchmark(backend, requests, a.run);
  log_first_errors(result.results);
  const fb::Report report = fb::make_report(result.results, result.duration_s, a.slo);
  std::cout << fb::format_table(report);
  if (!a.json_path.empty()) {
    std::ofstream out(a.json_path);
    out << fb::to_json(report).dump(2) << "\n";
    if (!out) throw std::runtime_error("cannot write " + a.json_path);
  }
  return report.num_ok == report.num_requests ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashserve-bench: load test for OpenAI-compatible streaming completions"};
  Args args;
  add_flags(app, args);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flashserve-bench: %s\n", e.what());
    return 2;
  }
}
