// A real Prometheus scrapes a running `flashserve serve` and answers PromQL over its metrics: the
// exposition passes the real parser, and the names, labels and values are what dashboards query.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/util/patient_client.h"
#include "tests/server/prometheus_harness.h"
#include "tests/util/server_process.h"

namespace flashserve {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kServedName = "tiny-metrics";
using test::make_temp_dir;
using test::PrometheusProcess;

struct Completed {
  int num_requests = 0;
  int num_length = 0;  // finish_reason "length"
  int num_output_tokens = 0;
};

// Non-streaming completions, greedy; what the server says it did is what the metrics must show.
Completed send_completions(int http_port, const std::vector<std::string>& prompts) {
  httplib::Client client = test::patient_client(http_port);
  Completed done;
  for (const std::string& prompt : prompts) {
    const json request = {{"model", kServedName}, {"prompt", prompt},  {"max_tokens", 5},
                          {"temperature", 0},     {"ignore_eos", true}};
    auto res = client.Post("/v1/completions", request.dump(), "application/json");
    if (!res || res->status != 200) {
      ADD_FAILURE() << "POST /v1/completions: " << (res ? res->status : -1) << " " << (res ? res->body : "");
      continue;
    }
    const json body = json::parse(res->body);
    ++done.num_requests;
    done.num_length += body["choices"][0]["finish_reason"] == "length";
    done.num_output_tokens += body["usage"]["completion_tokens"].get<int>();
  }
  return done;
}

// The value of the one series in `result` carrying model_name (and `label` = `value` when given),
// or -1 when there is none yet.
double series_value(const json& result, const std::string& label = "", const std::string& value = "") {
  for (const json& series : result) {
    const json& m = series["metric"];
    if (m.value("model_name", "") != kServedName) continue;
    if (!label.empty() && m.value(label, "") != value) continue;
    return std::stod(series["value"][1].get<std::string>());
  }
  return -1;
}

class PrometheusScrape : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir(); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(PrometheusScrape, PromQlSeesServedRequests) {
  test::ServerProcess server(test::tiny_model_for_server(), {"--served-model-name", kServedName});
  const Completed done = send_completions(server.http_port(), {"hello", "the quick brown fox", "1 2 3"});
  ASSERT_EQ(done.num_requests, 3);
  ASSERT_EQ(done.num_length, 3) << "ignore_eos: every request runs to max_tokens";

  PrometheusProcess prometheus(dir_, server.http_port());
  ASSERT_TRUE(prometheus.wait_ready(30s)) << "prometheus did not become ready:\n" << prometheus.log();

  json success, tokens, latency;
  bool seen = false;
  for (auto deadline = std::chrono::steady_clock::now() + 30s; !seen && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(500ms);
    success = prometheus.query("flashserve_request_success_total");
    tokens = prometheus.query("sum by (model_name) (flashserve_generation_tokens_total)");
    latency = prometheus.query("flashserve_e2e_request_latency_seconds_count");
    seen = series_value(success, "finished_reason", "length") == done.num_length &&
           series_value(tokens) == done.num_output_tokens && series_value(latency) == done.num_requests;
  }
  EXPECT_TRUE(seen) << "want " << done.num_length << " length finishes, " << done.num_output_tokens
                    << " output tokens, " << done.num_requests << " latencies; got\n"
                    << success.dump() << "\n" << tokens.dump() << "\n" << latency.dump() << "\ntargets: "
                    << prometheus.api("/api/v1/targets").dump() << "\nprometheus log:\n" << prometheus.log()
                    << "\nserver log:\n" << server.log();
  EXPECT_EQ(series_value(success, "finished_reason", "stop"), 0);
  EXPECT_EQ(series_value(success, "finished_reason", "abort"), 0);
}

}  // namespace
}  // namespace flashserve
