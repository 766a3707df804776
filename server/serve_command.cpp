#include "server/serve_command.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <filesystem>

#include "server/grpc_server.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/serving.h"

namespace flashserve {
namespace {

// Blocks SIGTERM/SIGINT in this thread and every thread it starts later, so that only sigwait()
// below sees them.
sigset_t block_shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

std::unique_ptr<LlamaModel> load_model(const std::string& path) {
  spdlog::info("loading model {}", path);
  const auto t0 = Clock::now();
  auto model = LlamaModel::load(path);
  const ModelConfig& c = model->config();
  spdlog::info("loaded '{}' ({}): {} layers, dim {}, {} heads / {} KV heads, vocab {}, context {}, in {:.2f} s", c.name,
               c.arch, c.num_layers, c.dim, c.num_heads, c.num_kv_heads, c.vocab_size, c.context_len,
               std::chrono::duration<double>(Clock::now() - t0).count());
  return model;
}

int serve(const ServeOptions& o, const sigset_t& shutdown_signals) {
  const auto model = load_model(o.model_path);
  const std::string name =
      o.served_model_name.empty() ? std::filesystem::path(o.model_path).stem().string() : o.served_model_name;
  Metrics metrics(name);
  Serving serving(*model, name, o.engine, &metrics);
  HttpServer http(serving, [&] { return metrics.render(serving.stats()); },
                  HttpOptions{o.host, o.port, o.api_key, o.max_body_bytes, o.http_threads});
  GrpcServer grpc(serving, o.host + ":" + std::to_string(o.grpc_port));
  http.start();
  grpc.start();
  spdlog::info("serving '{}': HTTP on http://{}:{} (OpenAI API under /v1), gRPC on {}:{}{}", name, o.host, http.port(),
               o.host, grpc.port(), o.api_key.empty() ? "" : ", API key required");

  int sig = 0;
  sigwait(&shutdown_signals, &sig);
  spdlog::info("received {}: refusing new requests, waiting up to {} s for {} in flight", strsignal(sig),
               o.grace_period_s, serving.num_in_flight());
  serving.start_draining();
  grpc.set_not_serving();
  const auto deadline = Clock::now() + std::chrono::seconds(o.grace_period_s);
  if (!serving.wait_idle(deadline)) {
    spdlog::warn("grace period over: aborting {} requests still in flight", serving.num_in_flight());
  }
  grpc.stop(Clock::now() + std::chrono::seconds(1));
  http.stop();
  spdlog::info("stopped");
  return 0;
}

}  // namespace

void ServeOptions::add_to(CLI::App& app) {
  app.add_option("--model", model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  app.add_option("--host", host, "Address to bind (HTTP and gRPC)")->capture_default_str();
  app.add_option("--port", port, "HTTP port (OpenAI API, /health, /ready, /metrics)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--grpc-port", grpc_port, "gRPC port")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--api-key", api_key, "Require 'Authorization: Bearer KEY' on the API")->envname("FLASHSERVE_API_KEY");
  app.add_option("--served-model-name", served_model_name, "Model name clients use (default: file name without .gguf)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.add_option("--grace-period", grace_period_s, "Seconds in-flight requests may finish after SIGTERM")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-body-bytes", max_body_bytes, "Largest HTTP request body")->capture_default_str();
  app.add_option("--http-threads", http_threads, "HTTP worker threads (each open stream holds one)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  engine.add_to(app);
}

int run_serve(const ServeOptions& o) {
  spdlog::set_level(spdlog::level::from_str(o.log_level));
  const sigset_t signals = block_shutdown_signals();
  try {
    return serve(o, signals);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}

}  // namespace flashserve
