#include "server/grpc_reflection.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <set>

namespace flashserve {
namespace {

namespace v1 = grpc::reflection::v1;
namespace gp = google::protobuf;

void fail(v1::ServerReflectionResponse& r, grpc::StatusCode code, const std::string& message) {
  r.mutable_error_response()->set_error_code(int32_t(code));
  r.mutable_error_response()->set_error_message(message);
}

// `file` and every file it imports, each once, the file first (as v1alpha answers).
void add_file_and_imports(const gp::FileDescriptor* file, v1::FileDescriptorResponse& out,
                          std::set<const gp::FileDescriptor*>& sent) {
  if (!sent.insert(file).second) return;
  gp::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out.add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i) add_file_and_imports(file->dependency(i), out, sent);
}

}  // namespace

v1::ServerReflectionResponse ReflectionV1Service::answer(const v1::ServerReflectionRequest& request) const {
  const gp::DescriptorPool* pool = gp::DescriptorPool::generated_pool();
  v1::ServerReflectionResponse r;
  r.set_valid_host(request.host());
  *r.mutable_original_request() = request;
  const gp::FileDescriptor* file = nullptr;
  std::string missing;
  switch (request.message_request_case()) {
    case v1::ServerReflectionRequest::kListServices:
      for (const std::string& name : services_) r.mutable_list_services_response()->add_service()->set_name(name);
      return r;
    case v1::ServerReflectionRequest::kFileByFilename:
      file = pool->FindFileByName(request.file_by_filename());
      missing = "file not found: " + request.file_by_filename();
      break;
    case v1::ServerReflectionRequest::kFileContainingSymbol:
      file = pool->FindFileContainingSymbol(request.file_containing_symbol());
      missing = "symbol not found: " + request.file_containing_symbol();
      break;
    case v1::ServerReflectionRequest::kFileContainingExtension: {
      const v1::ExtensionRequest& e = request.file_containing_extension();
      const gp::Descriptor* type = pool->FindMessageTypeByName(e.containing_type());
      const gp::FieldDescriptor* ext = type ? pool->FindExtensionByNumber(type, e.extension_number()) : nullptr;
      file = ext ? ext->file() : nullptr;
      missing = "extension not found: " + e.containing_type() + " " + std::to_string(e.extension_number());
      break;
    }
    case v1::ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const gp::Descriptor* type = pool->FindMessageTypeByName(request.all_extension_numbers_of_type());
      if (!type) {
        fail(r, grpc::StatusCode::NOT_FOUND, "type not found: " + request.all_extension_numbers_of_type());
        return r;
      }
      std::vector<const gp::FieldDescriptor*> extensions;
      pool->FindAllExtensions(type, &extensions);
      v1::ExtensionNumberResponse* numbers = r.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const gp::FieldDescriptor* e : extensions) numbers->add_extension_number(e->number());
      return r;
    }
    default:
      fail(r, grpc::StatusCode::INVALID_ARGUMENT, "the request names no question");
      return r;
  }
  if (!file) {
    fail(r, grpc::StatusCode::NOT_FOUND, missing);
    return r;
  }
  std::set<const gp::FileDescriptor*> sent;
  add_file_and_imports(file, *r.mutable_file_descriptor_response(), sent);
  return r;
}

grpc::Status ReflectionV1Service::ServerReflectionInfo(
    grpc::ServerContext*, grpc::ServerReaderWriter<v1::ServerReflectionResponse, v1::ServerReflectionRequest>* stream) {
  v1::ServerReflectionRequest request;
  while (stream->Read(&request)) {
    if (!stream->Write(answer(request))) break;
  }
  return grpc::Status::OK;
}

}  // namespace flashserve
