// flashserve-bench: load-tests an OpenAI-compatible server (or flashserve's gRPC API) with streamed
// completions and reports throughput, latency percentiles and goodput, for one rate or a sweep.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "client/dataset.h"
#include "client/grpc_backend.h"
#include "client/http_backend.h"
#include "client/plot.h"
#include "client/runner.h"
#include "client/sweep.h"

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
  std::string sweep_rates;  // "1,2,inf": one run per rate, one report
  std::string plot_path;    // with a sweep: latency-vs-rate PNG
  std::string dataset_path;
  std::string backend = "http";
  std::string grpc_address = "127.0.0.1:50051";
  std::string json_schema_path;
  double interval_s = 0;  // > 0: the JSON report also has one report per interval of sending
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
  app.add_option("--interval", a.interval_s,
                 "With --json: also a report per this many seconds of sending (\"intervals\"), by send time")
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-progress", a.no_progress, "No progress bar on stderr");
  app.add_option("--sweep-rates", a.sweep_rates, "Comma-separated rates (inf allowed): one run each, one report");
  app.add_option("--plot", a.plot_path, "With --sweep-rates: write a latency-vs-rate PNG (needs gnuplot)");
  app.add_option("--shared-prefix-len", a.workload.shared_prefix_len, "Words every prompt starts with")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--dataset", a.dataset_path, "Prompts from a JSON array or JSONL file ({\"prompt\", \"max_tokens\"})");
  app.add_option("--backend", a.backend, "http or grpc")->capture_default_str()->check(CLI::IsMember({"http", "grpc"}));
  app.add_option("--grpc-address", a.grpc_address, "gRPC server host:port")->capture_default_str();
  app.add_option("--json-schema", a.json_schema_path,
                 "Constrain every request to this JSON Schema file (structured output; end-of-sequence honoured)")
      ->check(CLI::ExistingFile);
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

double parse_rate(const std::string& text) {
  try {
    return std::stod(text);  // accepts "inf"
  } catch (const std::exception&) {
    throw std::invalid_argument("--request-rate: expected a number or inf, got '" + text + "'");
  }
}

void check_combinations(const Args& a) {
  if (!a.plot_path.empty() && a.sweep_rates.empty()) throw std::invalid_argument("--plot needs --sweep-rates");
  if (!a.sweep_rates.empty() && a.run.concurrency > 0) {
    throw std::invalid_argument("--sweep-rates sweeps open-loop rates; it cannot be combined with --concurrency");
  }
  if (a.interval_s > 0 && !a.sweep_rates.empty()) {
    throw std::invalid_argument("--interval applies to one run, not a sweep");
  }
  if (!a.dataset_path.empty() && a.workload.shared_prefix_len > 0) {
    throw std::invalid_argument("--shared-prefix-len applies to synthetic prompts, not --dataset");
  }
}

// Warm-up requests first, then the measured ones.
std::vector<fb::BenchRequest> build_requests(const Args& a) {
  fb::WorkloadOptions wo = a.workload;
  wo.num_requests += a.warmup;
  if (a.dataset_path.empty()) return fb::make_synthetic_workload(wo);
  return fb::make_dataset_workload(fb::load_dataset(a.dataset_path), wo.num_requests, wo.output_len, wo.seed);
}

std::string read_json_schema(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path);
  const nlohmann::json schema = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) throw std::invalid_argument("--json-schema: " + path + " is not valid JSON");
  return schema.dump();
}

std::unique_ptr<fb::Backend> make_backend(const Args& a) {
  const std::string schema = read_json_schema(a.json_schema_path);
  if (a.backend == "grpc") return std::make_unique<fb::GrpcBackend>(fb::GrpcOptions{a.grpc_address, a.http.timeout_s, schema});
  fb::HttpOptions http = a.http;
  http.json_schema = schema;
  return std::make_unique<fb::HttpBackend>(http);
}

// The run's report, and with --interval one per interval of sending.
std::pair<fb::Report, nlohmann::json> measure(fb::Backend& backend, const std::vector<fb::BenchRequest>& requests,
                                              const Args& a) {
  const fb::RunResult result = fb::run_benchmark(backend, requests, a.run);
  fb::log_first_errors(result.results);
  const fb::Report report = fb::make_report(result.results, result.duration_s, a.slo);
  nlohmann::json j = fb::to_json(report);
  if (a.interval_s > 0) j["intervals"] = fb::interval_reports(result.results, a.interval_s, a.slo);
  return {report, j};
}

void write_json(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

int run_sweep(fb::Backend& backend, const std::vector<fb::BenchRequest>& requests, const Args& a) {
  const std::vector<fb::SweepRow> rows = fb::run_rate_sweep(backend, requests, fb::parse_rates(a.sweep_rates), a.run, a.slo);
  bool all_ok = true;
  for (const fb::SweepRow& row : rows) all_ok = all_ok && row.report.num_ok == row.report.num_requests;
  std::cout << fb::format_sweep_table(rows);
  write_json(a.json_path, fb::sweep_json(rows));
  if (!a.plot_path.empty()) fb::write_latency_plot(rows, a.plot_path);
  return all_ok ? 0 : 1;
}

int run(Args& a) {
  check_combinations(a);
  if (a.sweep_rates.empty()) a.run.request_rate = parse_rate(a.request_rate);
  a.run.seed = a.workload.seed;
  a.run.show_progress = !a.no_progress;
  std::vector<fb::BenchRequest> requests = build_requests(a);
  const std::vector<fb::BenchRequest> warmup(requests.begin(), requests.begin() + a.warmup);
  requests.erase(requests.begin(), requests.begin() + a.warmup);

  const std::unique_ptr<fb::Backend> backend = make_backend(a);
  warm_up(*backend, warmup, a);
  if (!a.sweep_rates.empty()) return run_sweep(*backend, requests, a);
  const auto [report, json] = measure(*backend, requests, a);
  std::cout << fb::format_table(report);
  write_json(a.json_path, json);
  return report.num_ok == report.num_requests ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"flashserve-bench: load test for streaming completions (OpenAI HTTP or flashserve gRPC)"};
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
