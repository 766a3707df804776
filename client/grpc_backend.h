// Streaming generation over gRPC (flashserve.v1.Generation/GenerateStream), timed per message.
#pragma once
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "client/backend.h"
#include "flashserve.grpc.pb.h"

namespace flashserve::bench {

// Turns the messages of one GenerateStream call, with the time each arrived (seconds after the
// call started), into a result. Content messages are those with non-empty text: the server may
// send empty deltas while a UTF-8 character is incomplete, which are not token boundaries a user sees.
class GrpcStreamRecorder {
 public:
  void on_message(const flashserve::v1::GenerateStreamResponse& message, double t_s);
  // The call ended at `t_s` with `status`; a failed status is an error named by its code.
  RequestResult finish(const grpc::Status& status, double t_s);

 private:
  RequestResult result_;
  ContentTimer content_;
  int32_t num_tokens_ = 0;      // token ids seen, if the final usage is missing
  int32_t usage_tokens_ = -1;
};

// "UNAVAILABLE", "DEADLINE_EXCEEDED", ... as gRPC spells them.
const char* status_code_name(grpc::StatusCode code);

struct GrpcOptions {
  std::string address = "127.0.0.1:50051";
  double timeout_s = 300.0;  // deadline for the whole call
  std::string json_schema;   // as HttpOptions::json_schema
};

class GrpcBackend final : public Backend {
 public:
  // One channel for all requests (gRPC multiplexes calls on it and it is thread-safe).
  explicit GrpcBackend(GrpcOptions options);
  RequestResult send(const BenchRequest& request) override;

 private:
  GrpcOptions options_;
  std::unique_ptr<flashserve::v1::Generation::Stub> stub_;
};

}  // namespace flashserve::bench
