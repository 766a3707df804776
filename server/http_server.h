// The OpenAI-compatible HTTP API and Anthropic's Messages API, plus health, readiness, metrics and
// tokenize endpoints, behind our event loop (http_loop.h) with cpp-httplib parsing and routing
// inside it. Handlers never throw past one wrapper that turns exceptions into error JSON in the
// shape of the route's API.
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "server/api_key.h"
#include "server/serving.h"

namespace flashserve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                       // 0: any free port (see port())
  ApiKey api_key;                        // not required: no authentication
  size_t max_body_bytes = 16 << 20;      // larger bodies, chunked or not, get 413
  size_t max_buffered_bytes = 256 << 20; // request bytes in memory at once, all connections
  int num_threads = 4;                   // workers that parse and tokenize requests
  size_t max_queued = 1024;              // requests waiting for a worker; beyond: 429
  double max_queue_time_s = 0;           // waiting for a worker longer than this: 429 (0: no limit)
  int max_connections = 10000;           // beyond: 503
  double idle_timeout_s = 30;            // a connection that sends nothing for this long is closed
  double request_timeout_s = 10;         // a request must arrive whole within this (else 408)
  std::string tls_cert, tls_key;         // both set: HTTPS
  std::vector<std::string> allowed_origins;  // CORS (server/cors.h): browser origins allowed, "*" any; empty: off
  size_t max_stored_responses = 1024;    // Responses API store (response_store.h); 0: off
  size_t stored_responses_mib = 64;      // its byte budget
};

class HttpServer {
 public:
  // `render_metrics` produces the /metrics body.
  HttpServer(Serving& serving, std::function<std::string()> render_metrics, HttpOptions options);
  ~HttpServer();
  // Binds and starts serving on a background thread; throws std::runtime_error if it cannot bind
  // (or the TLS files cannot be loaded).
  void start();
  // Answers close their connections from now on; idle connections are closed.
  void set_draining();
  // Ends streams still running with a final event, sends what it can until `deadline`, then
  // closes every connection.
  void stop(std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1));
  int port() const;
  size_t num_queued() const;  // requests waiting for a worker (they count as waiting)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve
