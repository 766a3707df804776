// Server reflection v1 (grpc.reflection.v1.ServerReflection): what gRPC's own plugin serves as
// v1alpha, for the tools that ask v1 first. Answers from the process's generated descriptor pool:
// the services it was given, files by name, by symbol and by extension, a type's extensions.
#pragma once
#include <string>
#include <vector>

#include "grpc/reflection/v1/reflection.grpc.pb.h"

namespace flashserve {

class ReflectionV1Service final : public grpc::reflection::v1::ServerReflection::Service {
 public:
  // `services`: the full names list_services reports.
  explicit ReflectionV1Service(std::vector<std::string> services) : services_(std::move(services)) {}

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<grpc::reflection::v1::ServerReflectionResponse,
                               grpc::reflection::v1::ServerReflectionRequest>* stream) override;

  // One request's answer (the stream's work, exposed for tests).
  grpc::reflection::v1::ServerReflectionResponse answer(const grpc::reflection::v1::ServerReflectionRequest& request) const;

 private:
  std::vector<std::string> services_;
};

}  // namespace flashserve
