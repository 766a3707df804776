// The OpenAI-compatible HTTP API (cpp-httplib), plus health, readiness, metrics and tokenize
// endpoints. cpp-httplib stays inside http_server.cpp; handlers never throw past one wrapper that
// turns exceptions into OpenAI error JSON.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include "server/serving.h"

namespace flashserve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                        // 0: any free port (see port())
  std::string api_key;                    // empty: no authentication
  size_t max_body_bytes = 16 << 20;       // larger bodies get 413
  int num_threads = 64;                   // each open stream holds one
};

class HttpServer {
 public:
  // `render_metrics` produces the /metrics body.
  HttpServer(Serving& serving, std::function<std::string()> render_metrics, HttpOptions options);
  ~HttpServer();
  // Binds and starts serving on a background thread; throws std::runtime_error if it cannot bind.
  void start();
  // Stops accepting and closes connections; returns when the listener thread has ended.
  void stop();
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve
