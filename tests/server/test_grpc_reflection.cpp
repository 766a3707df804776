// Server reflection v1 (server/grpc_reflection.h), question by question, from the process's
// generated descriptors.
#include <gtest/gtest.h>

#include <google/protobuf/descriptor.pb.h>

#include "flashserve.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "server/grpc_reflection.h"

namespace flashserve {
namespace {

namespace v1 = grpc::reflection::v1;

const ReflectionV1Service kService({"flashserve.v1.Generation", "grpc.health.v1.Health"});

// The descriptors the server binary links (grpc_server.cpp uses both files): linking them here too
// puts them in this test's generated pool.
const bool kLinked = grpc::health::v1::HealthCheckRequest::descriptor() && flashserve::v1::GenerateRequest::descriptor();

std::vector<std::string> file_names(const v1::ServerReflectionResponse& r) {
  std::vector<std::string> names;
  for (const std::string& bytes : r.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto file;
    EXPECT_TRUE(file.ParseFromString(bytes));
    names.push_back(file.name());
  }
  return names;
}

TEST(ReflectionV1, ListsItsServices) {
  ASSERT_TRUE(kLinked);
  v1::ServerReflectionRequest q;
  q.set_list_services("*");
  q.set_host("h");
  const v1::ServerReflectionResponse r = kService.answer(q);
  EXPECT_EQ(r.valid_host(), "h");
  EXPECT_EQ(r.original_request().list_services(), "*");
  ASSERT_EQ(r.list_services_response().service_size(), 2);
  EXPECT_EQ(r.list_services_response().service(1).name(), "grpc.health.v1.Health");
}

TEST(ReflectionV1, DescribesBySymbolAndFileWithImports) {
  v1::ServerReflectionRequest q;
  q.set_file_containing_symbol("grpc.health.v1.Health.Check");
  EXPECT_EQ(file_names(kService.answer(q)), (std::vector<std::string>{"grpc/health/v1/health.proto"}));
  q.set_file_containing_symbol("flashserve.v1.Generation");
  const std::vector<std::string> files = file_names(kService.answer(q));
  ASSERT_FALSE(files.empty());
  EXPECT_EQ(files[0], "flashserve.proto") << "the file first, then what it imports";
  q.set_file_by_filename("flashserve.proto");
  EXPECT_EQ(file_names(kService.answer(q)), files);
}

TEST(ReflectionV1, ExtensionsOfAType) {
  v1::ServerReflectionRequest q;
  q.set_all_extension_numbers_of_type("grpc.health.v1.HealthCheckRequest");
  const v1::ServerReflectionResponse r = kService.answer(q);
  EXPECT_EQ(r.all_extension_numbers_response().base_type_name(), "grpc.health.v1.HealthCheckRequest");
  EXPECT_EQ(r.all_extension_numbers_response().extension_number_size(), 0);
}

TEST(ReflectionV1, UnknownNamesAreNotFound) {
  v1::ServerReflectionRequest q;
  q.set_file_containing_symbol("no.such.Service");
  EXPECT_EQ(kService.answer(q).error_response().error_code(), int(grpc::StatusCode::NOT_FOUND));
  q.set_file_by_filename("nope.proto");
  EXPECT_EQ(kService.answer(q).error_response().error_code(), int(grpc::StatusCode::NOT_FOUND));
  q.mutable_file_containing_extension()->set_containing_type("no.Such");
  EXPECT_EQ(kService.answer(q).error_response().error_code(), int(grpc::StatusCode::NOT_FOUND));
  q.set_all_extension_numbers_of_type("no.Such");
  EXPECT_EQ(kService.answer(q).error_response().error_code(), int(grpc::StatusCode::NOT_FOUND));
  EXPECT_EQ(kService.answer(v1::ServerReflectionRequest{}).error_response().error_code(),
            int(grpc::StatusCode::INVALID_ARGUMENT));
}

}  // namespace
}  // namespace flashserve
