#include "client/grpc_backend.h"

#include <chrono>

namespace flashserve::bench {

namespace pb = flashserve::v1;

void GrpcStreamRecorder::on_message(const pb::GenerateStreamResponse& message, double t_s) {
  num_tokens_ += message.tokens_size();
  if (message.has_usage()) usage_tokens_ = message.usage().completion_tokens();
  if (message.text().empty()) return;
  content_.on_content(t_s, result_);
}

const char* status_code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

namespace {

// The coarse kind keeps the exit status and first-error log working as for HTTP; the report
// counts gRPC errors by their code name (error_name).
ErrorKind error_kind(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE: return ErrorKind::Connect;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return ErrorKind::Timeout;
    default: return ErrorKind::Stream;
  }
}

}  // namespace

RequestResult GrpcStreamRecorder::finish(const grpc::Status& status, double t_s) {
  result_.e2e_s = t_s;
  result_.output_tokens = usage_tokens_ >= 0 ? usage_tokens_ : num_tokens_;
  if (!status.ok()) {
    result_.error = error_kind(status.error_code());
    result_.error_name = status_code_name(status.error_code());
    result_.error_detail = result_.error_name + ": " + status.error_message();
  } else if (content_.count() == 0) {
    result_.error = ErrorKind::Stream;
    result_.error_detail = "no content in the stream";
  }
  return result_;
}

GrpcBackend::GrpcBackend(GrpcOptions options)
    : options_(std::move(options)),
      stub_(pb::Generation::NewStub(grpc::CreateChannel(options_.address, grpc::InsecureChannelCredentials()))) {}

RequestResult GrpcBackend::send(const BenchRequest& request) {
  using clock = std::chrono::steady_clock;
  pb::GenerateRequest req;
  req.set_text(request.prompt);
  req.mutable_stopping()->set_max_tokens(request.output_len);
  if (options_.json_schema.empty()) {
    req.mutable_stopping()->set_ignore_eos(true);  // exactly output_len tokens, as with HTTP
  } else {
    req.mutable_constraint()->set_json_schema(options_.json_schema);
    req.mutable_constraint()->set_strict(true);
  }

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(options_.timeout_s)));
  const auto start = clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
  GrpcStreamRecorder recorder;
  auto reader = stub_->GenerateStream(&ctx, req);
  for (pb::GenerateStreamResponse message; reader->Read(&message);) recorder.on_message(message, elapsed());
  const grpc::Status status = reader->Finish();
  RequestResult result = recorder.finish(status, elapsed());
  result.input_len = request.input_len;
  return result;
}

}  // namespace flashserve::bench
