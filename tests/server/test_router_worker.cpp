// flashserve as a worker behind a router: the load report (GET /v1/loads, the shape the Shepherd
// Model Gateway's load monitor reads), and -- when the pinned `smg` is in the venv -- two replicas
// behind a real `smg launch`: the gateway activates both, learns their model, reads their loads
// and routes a chat through them.
#include <gtest/gtest.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fcntl.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "server/load_report.h"
#include "tests/server/http_harness.h"

extern char** environ;

namespace flashserve::test {
namespace {

TEST(LoadReport, TellsRunningWaitingAndKvTokens) {
  LoadFigures f;
  f.engine.num_running = 3;
  f.engine.num_waiting = 2;
  f.engine.num_kv_blocks = 100;
  f.engine.num_free_kv_blocks = 75;
  f.engine.prefix_cache = {1000, 250};
  f.block_size = 16;
  f.max_num_seqs = 64;
  f.front_queued = 4;
  const json r = json::parse(load_report(f).dump());
  EXPECT_EQ(r["dp_rank_count"], 1);
  ASSERT_EQ(r["loads"].size(), 1u);
  const json& l = r["loads"][0];
  EXPECT_EQ(l["dp_rank"], 0);
  EXPECT_EQ(l["num_running_reqs"], 3);
  EXPECT_EQ(l["num_waiting_reqs"], 6);  // the engine's queue and the front door's
  EXPECT_EQ(l["num_total_reqs"], 9);
  EXPECT_EQ(l["num_used_tokens"], 400);
  EXPECT_EQ(l["max_total_num_tokens"], 1600);
  EXPECT_DOUBLE_EQ(l["token_usage"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(l["cache_hit_rate"].get<double>(), 0.25);
  EXPECT_EQ(l["max_running_requests"], 64);
  EXPECT_TRUE(r["timestamp"].is_string());
}

TEST(LoadReport, ServedBehindTheApiKeyWhateverTheQuery) {
  HttpOptions options = test_http_options();
  options.api_key = ApiKey("k");
  HttpHarness h(tiny_model(), test_engine_options(), options);
  EXPECT_EQ(get(h, "/v1/loads").status, 401);
  const Reply r = get(h, "/v1/loads?include=core,disagg,queues,memory", {{"Authorization", "Bearer k"}});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_GT(r.body["loads"][0]["max_total_num_tokens"], 0);
  EXPECT_EQ(r.body["loads"][0]["num_running_reqs"], 0);
  EXPECT_EQ(post(h, "/v1/loads", json::object(), {{"Authorization", "Bearer k"}}).status, 405);
}

// `smg launch ...` from the venv, its output in a log file; killed on destruction.
class Gateway {
 public:
  Gateway(const std::vector<std::string>& worker_urls, int port) : port_(port) {
    const std::string smg = std::filesystem::path(FLASHSERVE_VENV_PYTHON).parent_path() / "smg";
    std::vector<std::string> args = {smg, "launch", "--host", "127.0.0.1", "--port", std::to_string(port),
                                     "--policy", "cache_aware", "--health-check-endpoint", "/ready",
                                     "--health-check-interval-secs", "1", "--load-monitor-interval", "1",
                                     "--worker-startup-check-interval", "1", "--prometheus-host", "127.0.0.1",
                                     "--prometheus-port", std::to_string(free_port()), "--worker-urls"};
    args.insert(args.end(), worker_urls.begin(), worker_urls.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    log_ = std::filesystem::temp_directory_path() / ("smg-" + std::to_string(port) + ".log");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    EXPECT_EQ(posix_spawn(&pid_, smg.c_str(), &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Gateway() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  // GET `path` on the gateway until `ok` holds for its reply (or 120 s pass); the last reply.
  Reply poll(const std::string& path, const std::function<bool(const Reply&)>& ok) const {
    Reply r;
    for (int i = 0; i < 240; ++i) {
      httplib::Client c("127.0.0.1", port_);
      c.set_connection_timeout(2);
      c.set_read_timeout(10);
      r = to_reply(c.Get(path.c_str()));
      if (ok(r)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return r;
  }
  int port() const { return port_; }
  std::string log() const {
    std::ifstream in(log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  int port_;
  pid_t pid_ = -1;
  std::filesystem::path log_;
};

TEST(SmgGateway, ActivatesBothReplicasLearnsTheModelAndReadsTheirLoad) {
  const std::string smg = std::filesystem::path(FLASHSERVE_VENV_PYTHON).parent_path() / "smg";
  if (!std::filesystem::exists(smg)) GTEST_SKIP() << "no " << smg << " (scripts/setup.sh installs the pinned smg)";
  ServerProcess a(tiny_model_for_server()), b(tiny_model_for_server());
  const std::string model = std::filesystem::path(tiny_model_for_server()).stem();
  const std::vector<std::string> urls = {"http://127.0.0.1:" + std::to_string(a.http_port()),
                                         "http://127.0.0.1:" + std::to_string(b.http_port())};
  Gateway gateway(urls, free_port());

  const Reply models = gateway.poll("/v1/models", [](const Reply& r) { return r.status == 200; });
  ASSERT_EQ(models.status, 200) << models.text << "\nsmg log:\n" << gateway.log();
  ASSERT_FALSE(models.body["data"].empty()) << models.text;
  EXPECT_EQ(models.body["data"][0]["id"], model) << models.text;

  const Reply workers = gateway.poll("/workers", [&](const Reply& r) {
    return r.status == 200 && r.text.find(urls[0]) != std::string::npos && r.text.find(urls[1]) != std::string::npos;
  });
  EXPECT_NE(workers.text.find(urls[0]), std::string::npos) << workers.text << "\nsmg log:\n" << gateway.log();
  EXPECT_NE(workers.text.find(urls[1]), std::string::npos) << workers.text;

  // The load monitor reads /v1/loads: one entry per replica, with our figures.
  const Reply loads = gateway.poll("/get_loads", [](const Reply& r) {
    return r.status == 200 && r.body.contains("loads") && r.body["loads"].size() == 2;
  });
  ASSERT_EQ(loads.status, 200) << loads.text << "\nsmg log:\n" << gateway.log();
  ASSERT_EQ(loads.body["loads"].size(), 2u) << loads.text << "\nsmg log:\n" << gateway.log();
  for (const json& l : loads.body["loads"]) {
    EXPECT_TRUE(l["worker"] == urls[0] || l["worker"] == urls[1]) << loads.text;
    EXPECT_GT(l.value("max_total_num_tokens", 0), 0) << loads.text;
    EXPECT_EQ(l.value("max_running_requests", 0), 64) << loads.text;
  }

  // Routed through the gateway to a replica and back.
  httplib::Client c("127.0.0.1", gateway.port());
  c.set_read_timeout(120);
  const json body = {{"model", model}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}};
  const Reply chat = to_reply(c.Post("/v1/chat/completions", body.dump(), "application/json"));
  EXPECT_EQ(chat.status, 200) << chat.text << "\nsmg log:\n" << gateway.log();
  EXPECT_EQ(chat.body["usage"]["completion_tokens"], 4) << chat.text;
}

}  // namespace
}  // namespace flashserve::test
