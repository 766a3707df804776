// The gRPC API (proto/flashserve.proto, package flashserve.v1) and the standard gRPC health
// service. gRPC types stay inside grpc_server.cpp.
#pragma once
#include <memory>
#include <string>
#include "server/serving.h"

namespace flashserve {

class GrpcServer {
 public:
  // `address` like "127.0.0.1:50051"; port 0 picks a free port (see port()).
  GrpcServer(Serving& serving, std::string address);
  ~GrpcServer();
  void start();                // throws std::runtime_error if it cannot bind
  void set_not_serving();      // health: NOT_SERVING (draining)
  void stop(Clock::time_point deadline);  // in-flight calls get until `deadline`, then are cancelled
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve
