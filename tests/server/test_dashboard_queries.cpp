// The deployment files under deploy/ are what operators run: every YAML and JSON file parses, and
// every query of the Grafana dashboard evaluates, in a real Prometheus scraping a real
// `flashserve serve`, to data once the server has served traffic. A renamed metric or label, or a
// PromQL typo, fails here instead of leaving an empty panel.
#include <gtest/gtest.h>
#include <httplib.h>
#include <stdio.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/util/patient_client.h"
#include "tests/server/prometheus_harness.h"
#include "tests/util/server_process.h"

namespace flashserve {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kServedName = "tiny";

fs::path deploy_dir() { return fs::path(FLASHSERVE_SOURCE_DIR) / "deploy"; }
fs::path dashboard_path() { return deploy_dir() / "grafana" / "dashboards" / "flashserve.json"; }

std::vector<fs::path> files_under(const fs::path& dir, const std::vector<std::string>& extensions) {
  std::vector<fs::path> found;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    for (const std::string& ext : extensions)
      if (entry.path().extension() == ext) found.push_back(entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

struct Target {
  std::string panel;
  std::string expr;  // with the dashboard variables substituted
};

// Every target expr of every panel (rows' nested panels included), as Grafana would send it for
// model_name = kServedName.
std::vector<Target> dashboard_targets(const json& dashboard) {
  std::vector<Target> targets;
  std::vector<json> panels(dashboard["panels"].begin(), dashboard["panels"].end());
  for (size_t i = 0; i < panels.size(); ++i) {
    const json panel = panels[i];
    if (panel.contains("panels"))
      for (const json& nested : panel["panels"]) panels.push_back(nested);
    if (!panel.contains("targets")) continue;
    for (const json& target : panel["targets"]) {
      std::string expr = target.value("expr", "");
      if (expr.empty()) {
        ADD_FAILURE() << "panel '" << panel.value("title", "") << "' has a target without expr";
        continue;
      }
      replace_all(expr, "${model_name}", kServedName);
      replace_all(expr, "$model_name", kServedName);
      replace_all(expr, "${__rate_interval}", "1m");
      replace_all(expr, "$__rate_interval", "1m");
      EXPECT_EQ(expr.find('$'), std::string::npos) << "unsubstituted variable in " << expr;
      targets.push_back({panel.value("title", ""), expr});
    }
  }
  return targets;
}

// Runs `command` with stderr joined to stdout into `output`; whether it exited 0.
bool succeeds(const std::string& command, std::string& output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return false;
  char buffer[512];
  while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = pclose(pipe);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int send_completions(int http_port, int count) {
  httplib::Client client = test::patient_client(http_port);
  int ok = 0;
  for (int i = 0; i < count; ++i) {
    const json request = {{"model", kServedName}, {"prompt", "hello " + std::to_string(i)},
                          {"max_tokens", 8},      {"temperature", 0},
                          {"ignore_eos", true}};
    auto res = client.Post("/v1/completions", request.dump(), "application/json");
    if (res && res->status == 200) {
      ++ok;
    } else {
      ADD_FAILURE() << "POST /v1/completions: " << (res ? res->status : -1) << " " << (res ? res->body : "");
    }
  }
  return ok;
}

TEST(DeployFiles, JsonFilesParse) {
  const auto files = files_under(deploy_dir(), {".json"});
  ASSERT_FALSE(files.empty());
  for (const fs::path& file : files) {
    std::ifstream in(file);
    EXPECT_FALSE(json::parse(in, nullptr, /*allow_exceptions=*/false).is_discarded()) << file << " is not valid JSON";
  }
}

// PyYAML (Debian python3-yaml, from scripts/setup.sh) parses every document of every file.
TEST(DeployFiles, YamlFilesParse) {
  const auto files = files_under(deploy_dir(), {".yaml", ".yml"});
  ASSERT_FALSE(files.empty());
  for (const fs::path& file : files) {
    std::string output;
    EXPECT_TRUE(succeeds("python3 -c 'import sys, yaml; list(yaml.safe_load_all(open(sys.argv[1])))' '" +
                             file.string() + "'",
                         output))
        << file << " is not valid YAML:\n" << output;
  }
}

// Offline, against the Kubernetes API's own schemas, strictly (scripts/validate_k8s.py).
TEST(DeployFiles, KubernetesManifestsValidate) {
  ASSERT_TRUE(fs::exists(FLASHSERVE_VENV_PYTHON)) << "run scripts/setup.sh to create the venv";
  std::string output;
  EXPECT_TRUE(succeeds(std::string(FLASHSERVE_VENV_PYTHON) + " " + FLASHSERVE_SOURCE_DIR + "/scripts/validate_k8s.py", output))
      << output;
  EXPECT_NE(output.find("valid    deploy/k8s/deployment.yaml"), std::string::npos) << output;
  EXPECT_NE(output.find("valid    deploy/k8s/hpa.yaml"), std::string::npos) << output;
  std::cout << output;
}

TEST(DeployFiles, DashboardUsesModelNameVariable) {
  std::ifstream in(dashboard_path());
  const json dashboard = json::parse(in);
  bool has_variable = false;
  for (const json& variable : dashboard["templating"]["list"]) has_variable |= variable["name"] == "model_name";
  EXPECT_TRUE(has_variable);
  for (const json& panel : dashboard["panels"])
    for (const json& target : panel.value("targets", json::array()))
      EXPECT_NE(target["expr"].get<std::string>().find("$model_name"), std::string::npos)
          << "panel '" << panel["title"] << "' ignores the model_name variable: " << target["expr"];
}

TEST(DashboardQueries, EveryPanelQueryReturnsDataAfterTraffic) {
  std::ifstream in(dashboard_path());
  const std::vector<Target> targets = dashboard_targets(json::parse(in));
  ASSERT_GE(targets.size(), 10u);

  const fs::path dir = test::make_temp_dir();
  {
    test::ServerProcess server(test::tiny_model_for_server(), {"--served-model-name", kServedName});
    test::PrometheusProcess prometheus(dir, server.http_port());
    ASSERT_TRUE(prometheus.wait_ready(30s)) << "prometheus did not become ready:\n" << prometheus.log();

    // rate() needs two scrapes with traffic between them: traffic, a few scrapes, more traffic.
    ASSERT_EQ(send_completions(server.http_port(), 4), 4);
    std::this_thread::sleep_for(3s);
    ASSERT_EQ(send_completions(server.http_port(), 4), 4);

    std::vector<std::string> failing;
    for (auto deadline = std::chrono::steady_clock::now() + 30s;;) {
      failing.clear();
      for (const Target& target : targets) {
        const json body = prometheus.api("/api/v1/query", {{"query", target.expr}});
        if (!body.is_object() || body.value("status", "") != "success") {
          failing.push_back("[" + target.panel + "] " + target.expr + "\n    error: " + body.dump());
        } else if (body["data"]["result"].empty()) {
          failing.push_back("[" + target.panel + "] " + target.expr + "\n    no data");
        }
      }
      if (failing.empty() || std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(1s);
    }
    std::string report;
    for (const std::string& f : failing) report += "  " + f + "\n";
    EXPECT_TRUE(failing.empty()) << failing.size() << " of " << targets.size() << " queries failed:\n"
                                 << report << "prometheus log:\n" << prometheus.log();
    std::cout << "[dashboard] " << targets.size() - failing.size() << " of " << targets.size()
              << " panel queries returned data\n";
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace flashserve
