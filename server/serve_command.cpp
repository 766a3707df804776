#include "server/serve_command.h"

#include <pthread.h>
#include <spdlog/async.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <csignal>
#include <cstdlib>
#include <future>
#include <thread>
#include <filesystem>

#include "server/cli_env.h"
#include "server/metrics.h"
#include "server/serving.h"

namespace flashserve {
namespace {

using namespace std::chrono_literals;

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

// Log lines go through a queue to one writer thread; when the queue is full (stderr stalled) the
// oldest lines are dropped. No thread that serves requests ever waits on the log.
void use_async_logger(const std::string& level) {
  spdlog::init_thread_pool(8192, 1);
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto logger = std::make_shared<spdlog::async_logger>("flashserve", sink, spdlog::thread_pool(),
                                                       spdlog::async_overflow_policy::overrun_oldest);
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::flush_on(spdlog::level::info);
}

// Flushes the log queue, but a stderr nobody reads must not keep the process from exiting: after
// a moment the unwritten lines are given up and the process ends without waiting for the writer.
[[noreturn]] void flush_log_then_exit(int code) {
  auto flushed = std::make_shared<std::promise<void>>();
  std::future<void> done = flushed->get_future();
  std::thread([flushed] {
    spdlog::shutdown();
    flushed->set_value();
  }).detach();
  if (done.wait_for(2s) != std::future_status::ready) std::_Exit(code);
  std::exit(code);
}

// Each open connection is a file descriptor; the usual soft limit of 1024 would cap them there.
void raise_open_file_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
}

std::unique_ptr<Model> load_model(const std::string& path) {
  spdlog::info("loading model {}", path);
  const auto t0 = Clock::now();
  auto model = Model::load(path);
  const ModelConfig& c = model->config();
  spdlog::info("loaded '{}' ({}): {} layers, dim {}, {} heads / {} KV heads, vocab {}, context {}, in {:.2f} s", c.name,
               c.arch, c.num_layers, c.dim, c.num_heads, c.num_kv_heads, c.vocab_size, c.context_len,
               std::chrono::duration<double>(Clock::now() - t0).count());
  return model;
}

// Draining: new requests get 503, in-flight ones get the grace period. Those still running after
// it end with an error that reaches their clients as a final event (SSE finish_reason "abort", an
// error event and [DONE]; gRPC UNAVAILABLE) before the listeners close.
void shut_down(const ServeOptions& o, Serving& serving, HttpServer& http, GrpcServer& grpc) {
  serving.start_draining();
  http.set_draining();
  grpc.set_not_serving();
  if (!serving.wait_idle(Clock::now() + std::chrono::seconds(o.grace_period_s))) {
    spdlog::warn("grace period over: ending {} requests still in flight", serving.num_in_flight());
    serving.abort_in_flight();
    serving.wait_idle(Clock::now() + 2s);
  }
  http.stop(Clock::now() + 2s);
  grpc.stop(Clock::now() + 1s);
}

int serve(const ServeOptions& o, const sigset_t& shutdown_signals) {
  const ApiKey key = ApiKey::from_flags(o.api_key, o.api_key_file);
  const auto model = load_model(o.model_path);
  const std::string name =
      o.served_model_name.empty() ? std::filesystem::path(o.model_path).stem().string() : o.served_model_name;
  Metrics metrics(name);
  Serving serving(*model, name, o.engine, &metrics);

  HttpOptions http_options = o.http;
  http_options.host = o.host;
  http_options.port = o.port;
  http_options.api_key = key;
  http_options.tls_cert = o.tls_cert;
  http_options.tls_key = o.tls_key;
  http_options.max_queue_time_s = o.engine.max_queue_time_s;  // one limit from arrival to start, worker queue included
  GrpcOptions grpc_options = o.grpc;
  grpc_options.address = o.host + ":" + std::to_string(o.grpc_port);
  grpc_options.api_key = key;
  grpc_options.tls_cert = o.tls_cert;
  grpc_options.tls_key = o.tls_key;
  grpc_options.max_message_bytes = o.http.max_body_bytes;

  HttpServer* http_ptr = nullptr;
  HttpServer http(serving, [&] {
    EngineStats stats = serving.stats();
    stats.num_waiting += int32_t(http_ptr ? http_ptr->num_queued() : 0);  // requests waiting for a worker count too
    return metrics.render(stats);
  }, http_options);
  http_ptr = &http;
  GrpcServer grpc(serving, grpc_options);
  http.start();
  grpc.start();
  const char* scheme = o.tls_cert.empty() ? "http" : "https";
  spdlog::info("serving '{}': HTTP on {}://{}:{} (OpenAI API under /v1), gRPC on {}:{}{}", name, scheme, o.host,
               http.port(), o.host, grpc.port(), key.required() ? ", API key required on both" : "");

  int sig = 0;
  sigwait(&shutdown_signals, &sig);
  spdlog::info("received {}: refusing new requests, waiting up to {} s for {} in flight", strsignal(sig),
               o.grace_period_s, serving.num_in_flight());
  shut_down(o, serving, http, grpc);
  spdlog::info("stopped");
  return 0;
}

void add_http_options(CLI::App& app, HttpOptions& h) {
  app.add_option("--max-body-bytes", h.max_body_bytes, "Largest request body, chunked or not (HTTP 413; gRPC message too)")
      ->capture_default_str();
  app.add_option("--http-threads", h.num_threads, "Workers that parse and tokenize HTTP requests (no stream holds one)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--http-max-queued", h.max_queued, "HTTP requests waiting for a worker; beyond: 429")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--http-max-connections", h.max_connections, "Open HTTP connections; beyond: 503")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--http-max-buffered-bytes", h.max_buffered_bytes,
                 "Request bytes held in memory at once, over all connections; beyond: 429")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--http-idle-timeout", h.idle_timeout_s,
                 "Seconds a connection may send nothing (between requests) or read nothing of an answer")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--http-request-timeout", h.request_timeout_s,
                 "Seconds a request may take to arrive whole, head and body (slow clients get 408)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--allowed-origins", h.allowed_origins,
                 "Browser origins allowed to call the API (CORS), comma-separated, or * for any (default: none)")
      ->delimiter(',');
  app.add_option("--max-stored-responses", h.max_stored_responses,
                 "Responses API: finished responses kept for previous_response_id and GET (least recently used "
                 "go first; 0: none kept)")
      ->capture_default_str();
  app.add_option("--stored-responses-mib", h.stored_responses_mib, "Responses API: memory the kept responses may use")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

void add_grpc_options(CLI::App& app, GrpcOptions& g) {
  app.add_option("--grpc-keepalive-time", g.keepalive_time_s, "Seconds between keepalive pings on idle gRPC connections (0: off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--grpc-keepalive-timeout", g.keepalive_timeout_s, "Seconds a ping may go unanswered before the connection is dropped")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--grpc-max-connection-idle", g.max_connection_idle_s, "Close gRPC connections idle this many seconds (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--grpc-max-connection-age", g.max_connection_age_s,
                 "Close gRPC connections this many seconds old, so clients rebalance (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--grpc-max-connection-age-grace", g.max_connection_age_grace_s,
                 "Seconds calls on an aged connection may still finish")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace

void ServeOptions::add_to(CLI::App& app) {
  app.add_option("--model", model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  app.add_option("--host", host, "Address to bind (HTTP and gRPC)")->capture_default_str();
  app.add_option("--port", port, "HTTP port (OpenAI API, /health, /ready, /metrics)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--grpc-port", grpc_port, "gRPC port")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--api-key", api_key, "Require 'Authorization: Bearer KEY' on the HTTP API and gRPC calls")
      ->envname("FLASHSERVE_API_KEY");
  app.add_option("--api-key-file", api_key_file, "Read the API key from this file's first line")
      ->envname("FLASHSERVE_API_KEY_FILE")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-cert", tls_cert, "PEM certificate chain: serve HTTPS and gRPC over TLS (with --tls-key)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", tls_key, "PEM private key for --tls-cert")->check(CLI::ExistingFile);
  app.add_option("--served-model-name", served_model_name, "Model name clients use (default: file name without .gguf)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  app.add_option("--grace-period", grace_period_s, "Seconds in-flight requests may finish after SIGTERM")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_http_options(app, http);
  add_grpc_options(app, grpc);
  engine.add_to(app);
  add_env_names(app);
}

void run_serve(const ServeOptions& o) {
  const sigset_t signals = block_shutdown_signals();  // before any thread starts, the logger's included
  use_async_logger(o.log_level);
  raise_open_file_limit();
  int code = 1;
  try {
    code = serve(o, signals);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
  }
  flush_log_then_exit(code);
}

}  // namespace flashserve
