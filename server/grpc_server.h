// The gRPC API (proto/flashserve.proto, package flashserve.v1), the standard gRPC health service and
// server reflection. gRPC types stay inside grpc_*.cpp.
#pragma once
#include <memory>
#include <string>
#include "server/api_key.h"
#include "server/serving.h"

namespace flashserve {

struct GrpcOptions {
  std::string address = "127.0.0.1:50051";  // port 0 picks a free port (see port())
  ApiKey api_key;                           // required: every Generation call needs it
  std::string tls_cert, tls_key;            // both set: TLS
  size_t max_message_bytes = 16 << 20;      // larger requests: RESOURCE_EXHAUSTED before parsing
  int keepalive_time_s = 60;                // ping idle connections this often (0: never)
  int keepalive_timeout_s = 20;             // and drop them when a ping goes unanswered this long
  int max_connection_idle_s = 0;            // close connections idle this long (0: never)
  int max_connection_age_s = 0;             // close connections this old, after a grace (0: never)
  int max_connection_age_grace_s = 30;
};

class GrpcServer {
 public:
  GrpcServer(Serving& serving, GrpcOptions options);
  ~GrpcServer();
  void start();                // throws std::runtime_error if it cannot bind or load the TLS files
  void set_not_serving();      // health: NOT_SERVING (draining)
  void stop(Clock::time_point deadline);  // in-flight calls get until `deadline`, then are cancelled
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve
