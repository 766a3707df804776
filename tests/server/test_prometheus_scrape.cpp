// A real Prometheus scrapes a running `flashserve serve` and answers PromQL over its metrics: the
// exposition passes the real parser, and the names, labels and values are what dashboards query.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/util/server_process.h"

namespace flashserve {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kServedName = "tiny-metrics";

fs::path make_temp_dir() {
  std::string pattern = (fs::temp_directory_path() / "flashserve-prometheus-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  return pattern;
}

// Scrapes one target every second. The timeout must not exceed the interval (the 10 s default
// would make Prometheus refuse the config).
void write_config(const fs::path& path, int target_port) {
  std::ofstream(path) << "global:\n"
                         "  scrape_interval: 1s\n"
                         "  scrape_timeout: 1s\n"
                         "scrape_configs:\n"
                         "  - job_name: flashserve\n"
                         "    static_configs:\n"
                         "      - targets: ['127.0.0.1:"
                      << target_port << "']\n";
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The `prometheus` binary (Debian package `prometheus`) as a child process in its own temp dir.
class PrometheusProcess {
 public:
  PrometheusProcess(const fs::path& dir, int target_port) : dir_(dir), port_(test::free_port()) {
    write_config(dir_ / "prometheus.yml", target_port);
    pid_ = fork();
    if (pid_ == 0) exec_child();
    if (pid_ < 0) throw std::runtime_error("fork failed");
  }

  ~PrometheusProcess() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (auto deadline = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < deadline;) {
      if (exited()) return;
      std::this_thread::sleep_for(50ms);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

  PrometheusProcess(const PrometheusProcess&) = delete;
  PrometheusProcess& operator=(const PrometheusProcess&) = delete;

  std::string log() const { return read_file(dir_ / "prometheus.log"); }

  bool exited() {
    if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == pid_) pid_ = -1;  // reaped: nothing to stop later
    return pid_ <= 0;
  }

  // Waits for /-/ready; false if it exits or is not ready within `timeout`.
  bool wait_ready(std::chrono::seconds timeout) {
    httplib::Client client("127.0.0.1", port_);
    client.set_connection_timeout(1s);
    for (auto deadline = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < deadline;) {
      if (exited()) return false;
      if (auto res = client.Get("/-/ready"); res && res->status == 200) return true;
      std::this_thread::sleep_for(200ms);
    }
    return false;
  }

  // GET `path` with `params` on its HTTP API: the parsed body, or null if there was no answer.
  json api(const std::string& path, const httplib::Params& params = {}) const {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(5s);
    auto res = client.Get(path, params, httplib::Headers{});
    if (!res || res->status != 200) return nullptr;
    return json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  }

  // The instant vector for `promql` (empty until a scrape has it).
  json query(const std::string& promql) const {
    const json body = api("/api/v1/query", {{"query", promql}});
    if (!body.is_object() || body.value("status", "") != "success") return json::array();
    return body["data"]["result"];
  }

 private:
  // In the child: never returns. Dies with the test process, so a crashed test leaves no scraper.
  [[noreturn]] void exec_child() {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int log = open((dir_ / "prometheus.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    const std::string config = "--config.file=" + (dir_ / "prometheus.yml").string();
    const std::string storage = "--storage.tsdb.path=" + (dir_ / "data").string();
    const std::string listen = "--web.listen-address=127.0.0.1:" + std::to_string(port_);
    execlp("prometheus", "prometheus", config.c_str(), storage.c_str(), listen.c_str(), nullptr);
    perror("exec prometheus (install the Debian package `prometheus`: scripts/setup.sh)");
    _exit(127);
  }

  fs::path dir_;
  int port_;
  pid_t pid_ = -1;
};

struct Completed {
  int num_requests = 0;
  int num_length = 0;  // finish_reason "length"
  int num_output_tokens = 0;
};

// Non-streaming completions, greedy; what the server says it did is what the metrics must show.
Completed send_completions(int http_port, const std::vector<std::string>& prompts) {
  httplib::Client client("127.0.0.1", http_port);
  client.set_read_timeout(60s);
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
