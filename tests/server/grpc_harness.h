// In-process gRPC tests: a Serving engine and a GrpcServer on a free loopback port, with a generated
// client stub and a raw client for the standard health service (whose generated code gRPC does not
// install).
#pragma once
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "flashserve.grpc.pb.h"
#include "server/grpc_server.h"
#include "server/serving.h"

namespace flashserve::test {

namespace pb = ::flashserve::v1;

inline EngineOptions small_engine_options() {
  EngineOptions o;
  o.kv_cache_bytes = 64 << 20;
  return o;
}

// Remembers how each request ended, to tell a request cancelled in the engine from one that ran
// to completion while nobody was listening.
class FinishRecorder : public ServingObserver {
 public:
  void on_output(const RequestOutput& o) override {
    std::lock_guard lock(mu_);
    if (o.finish) finishes_.push_back(*o.finish);
  }
  void on_step(const StepStats&) override {}
  std::vector<FinishReason> finishes() const {
    std::lock_guard lock(mu_);
    return finishes_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<FinishReason> finishes_;
};

class GrpcHarness {
  static GrpcOptions loopback() {
    GrpcOptions o;
    o.address = "127.0.0.1:0";
    return o;
  }

 public:
  explicit GrpcHarness(const Model& model, const EngineOptions& options = small_engine_options())
      : serving(model, "test-model", options, &recorder), server(serving, loopback()) {
    server.start();
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()), grpc::InsecureChannelCredentials());
    stub = pb::Generation::NewStub(channel);
  }
  ~GrpcHarness() { server.stop(Clock::now() + std::chrono::seconds(5)); }

  FinishRecorder recorder;
  Serving serving;
  GrpcServer server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::Generation::Stub> stub;
};

// True once every request has reported its end, nothing runs or waits and every KV block is free
// again, within `timeout`.
inline bool engine_idle(const Serving& serving, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const EngineStats s = serving.stats();
    if (serving.num_in_flight() == 0 && s.num_running == 0 && s.num_waiting == 0 &&
        s.num_free_kv_blocks == s.num_kv_blocks) {
      return true;
    }
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// grpc.health.v1.Health/Check, encoded by hand: the request is `string service = 1`, the response
// `ServingStatus status = 1` (1 SERVING, 2 NOT_SERVING). Returns the status, or -1 if the call failed.
inline int health_status(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  std::string request;
  if (!service.empty()) request = std::string("\x0a", 1) + char(service.size()) + service;
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buf(&slice, 1), response_buf;
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request_buf, &response_buf,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  if (!done.get_future().get().ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response_buf.Dump(&slices).ok()) return -1;
  std::string response;
  for (const grpc::Slice& s : slices) response.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (response.empty()) return 0;  // proto3 leaves the default (UNKNOWN) off the wire
  return response.size() == 2 && response[0] == '\x08' ? response[1] : -1;
}

inline pb::GenerateRequest text_request(const std::string& text, int32_t max_tokens, float temperature = 0.0f) {
  pb::GenerateRequest req;
  req.set_text(text);
  req.mutable_sampling()->set_temperature(temperature);
  req.mutable_stopping()->set_max_tokens(max_tokens);
  return req;
}

}  // namespace flashserve::test
