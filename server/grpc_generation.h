// The gRPC generation calls, on gRPC's callback API: no thread waits on a call. Engine events reach
// a call on the output thread (through its stream's notify hook) and become the unary answer or
// the next streamed messages; gRPC's own threads report writes done, cancellation and the end.
// Requests arrive as raw bytes so that an unparsable message gets INVALID_ARGUMENT with a reason.
// Private to the gRPC front-end.
#pragma once
#include <grpcpp/grpcpp.h>

#include <functional>

#include "flashserve.pb.h"
#include "server/api_key.h"
#include "server/serving.h"

namespace flashserve::grpc_api {

namespace pb = ::flashserve::v1;

// Parses `buffer` into `msg`; INVALID_ARGUMENT naming `what` when it is not one, or when it holds
// fields this server does not know (refused rather than ignored).
grpc::Status parse(const grpc::ByteBuffer& buffer, google::protobuf::Message& msg, const char* what);
grpc::ByteBuffer serialize(const google::protobuf::Message& msg);

// UNAUTHENTICATED unless the call carries "authorization: Bearer <key>" matching `key`.
grpc::Status check_auth(const grpc::CallbackServerContext& ctx, const ApiKey& key);

// The status an engine refusal or failure maps to, and the reason a refusal is counted under.
grpc::Status to_status(const RequestError& e);
std::string_view rejection_reason(const grpc::Status& s);

// The request as the engine takes it (one prompt, its parameters, its constraint compiled), or
// INVALID_ARGUMENT / OUT_OF_RANGE saying what is wrong. The compile stops early once `cancelled`
// says so (UNAVAILABLE). Parameter values are left for the engine's checks at submit.
grpc::Status engine_request(const Serving& serving, const pb::GenerateRequest& req,
                            const std::function<bool()>& cancelled, GenerateRequest& out);

grpc::ServerUnaryReactor* start_generate(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response, Serving& serving, const ApiKey& key);
grpc::ServerWriteReactor<grpc::ByteBuffer>* start_generate_stream(grpc::CallbackServerContext* ctx,
                                                                  const grpc::ByteBuffer* request, Serving& serving,
                                                                  const ApiKey& key);

}  // namespace flashserve::grpc_api
