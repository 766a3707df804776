// Conversions between the gRPC API's messages (proto/flashserve.proto) and the engine's types.
// Private to the gRPC front-end: only grpc_*.cpp include it.
#pragma once
#include <string>
#include <vector>
#include "flashserve.pb.h"
#include "model/tokenizer.h"
#include "scheduler/engine.h"

namespace flashserve::grpc_api {

namespace pb = ::flashserve::v1;

// Unset optional fields keep the SamplingParams defaults, which the proto documents. No
// validation here: Engine::submit refuses bad values with a message naming the field.
SamplingParams to_sampling_params(const pb::GenerateRequest& req);

pb::FinishReason to_proto(FinishReason reason);
void fill_usage(const RequestOutput& finished, pb::Usage* usage);

// Appends `tokens`; logprobs (and the alternatives' text) only when the request asked for them.
void add_tokens(const std::vector<SampledToken>& tokens, bool with_logprobs, const Tokenizer& tok,
                google::protobuf::RepeatedPtrField<pb::GeneratedToken>* out);

// proto3 strings must be valid UTF-8 (the receiver refuses the message otherwise), but a token's
// bytes or an arbitrary id sequence may split a character: such bytes become U+FFFD.
std::string valid_utf8(std::string bytes);

}  // namespace flashserve::grpc_api
