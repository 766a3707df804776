// A real Prometheus (the Debian `prometheus` binary) as a child process that scrapes one
// `flashserve serve` every second, for tests that check what PromQL sees of the server's metrics.
#pragma once
#include <fcntl.h>
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
#include <stdexcept>
#include <string>
#include <thread>

#include "tests/util/patient_client.h"
#include "tests/util/server_process.h"

namespace flashserve::test {

namespace prometheus_detail {
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
}  // namespace prometheus_detail

using namespace prometheus_detail;

inline fs::path make_temp_dir() {
  std::string pattern = (fs::temp_directory_path() / "flashserve-prometheus-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  return pattern;
}

// Scrapes one target every second. The timeout must not exceed the interval (the 10 s default
// would make Prometheus refuse the config).
inline void write_config(const fs::path& path, int target_port) {
  std::ofstream(path) << "global:\n"
                         "  scrape_interval: 1s\n"
                         "  scrape_timeout: 1s\n"
                         "scrape_configs:\n"
                         "  - job_name: flashserve\n"
                         "    static_configs:\n"
                         "      - targets: ['127.0.0.1:"
                      << target_port << "']\n";
}

inline std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The `prometheus` binary (Debian package `prometheus`) as a child process in its own temp dir.
class PrometheusProcess {
 public:
  PrometheusProcess(const fs::path& dir, int target_port) : dir_(dir), port_(free_port()) {
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
    httplib::Client client = test::patient_client(port_);
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
    httplib::Client client = test::patient_client(port_);
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

}  // namespace flashserve::test
