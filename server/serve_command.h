// `flashserve serve`: the product. Loads a model, serves the OpenAI-compatible HTTP API and the
// gRPC API from one engine, exports metrics, and shuts down gracefully on SIGTERM/SIGINT.
#pragma once
#include <string>
#include <CLI/CLI.hpp>
#include "server/engine_options.h"
#include "server/grpc_server.h"
#include "server/http_server.h"

namespace flashserve {

struct ServeOptions {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 8000;
  int grpc_port = 50051;
  std::string api_key;            // or $FLASHSERVE_API_KEY; empty: no authentication
  std::string api_key_file;       // or $FLASHSERVE_API_KEY_FILE: the key on its first line
  std::string tls_cert, tls_key;  // PEM files; both set: HTTPS and gRPC over TLS
  std::string served_model_name;  // default: the model file's name without .gguf
  std::string log_level = "info";
  int grace_period_s = 30;        // how long in-flight requests may finish after SIGTERM
  HttpOptions http;               // host, port, key and TLS are filled from the fields above
  GrpcOptions grpc;               // likewise
  EngineOptions engine;

  void add_to(CLI::App& app);
};

// Runs until SIGTERM or SIGINT, then exits the process: 0 after a graceful shutdown, 1 on an error.
[[noreturn]] void run_serve(const ServeOptions& opts);

}  // namespace flashserve
