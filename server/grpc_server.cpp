#include "server/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashserve.grpc.pb.h"
#include "server/grpc_convert.h"

namespace flashserve {
namespace {

namespace pb = ::flashserve::v1;
using grpc::Status;
using grpc::StatusCode;
using namespace std::chrono_literals;

// How long a handler waits for an engine event before looking at its call again: the bound on how
// late a cancelled or expired call releases its request's KV blocks.
constexpr auto kPollInterval = 25ms;

// Returns false when the client is gone and the request should be abandoned.
using EventSink = std::function<bool(const RequestOutput&)>;

Status invalid(const std::string& message) { return {StatusCode::INVALID_ARGUMENT, message}; }

Status rejection_status(const SubmitResult& r) {
  if (r.draining) return {StatusCode::UNAVAILABLE, r.rejection->message};
  switch (r.rejection->reason) {
    case RejectReason::Invalid: return invalid(r.rejection->message);
    case RejectReason::TooLong: return {StatusCode::OUT_OF_RANGE, r.rejection->message};
    case RejectReason::Overloaded: return {StatusCode::RESOURCE_EXHAUSTED, r.rejection->message};
  }
  return {StatusCode::INTERNAL, r.rejection->message};
}

// Handlers never throw: anything unexpected becomes INTERNAL with its message.
Status guarded(const std::function<Status()>& handler) {
  try {
    return handler();
  } catch (const std::exception& e) {
    spdlog::error("gRPC handler failed: {}", e.what());
    return {StatusCode::INTERNAL, e.what()};
  }
}

Status chat_prompt_ids(const Serving& serving, const pb::ChatMessages& messages, std::vector<int32_t>& ids) {
  if (messages.messages().empty()) return invalid("messages must hold at least one message");
  std::vector<ChatMessage> chat;
  for (const pb::ChatMessage& m : messages.messages()) chat.push_back({m.role(), m.content()});
  try {
    ids = serving.chat_prompt(chat);
  } catch (const UnsupportedTemplate& e) {
    return invalid(e.what());
  } catch (const std::invalid_argument& e) {
    return invalid(e.what());
  }
  return Status::OK;
}

// The prompt as token ids. An empty token id list is left to the engine, which refuses it.
Status prompt_ids(const Serving& serving, const pb::GenerateRequest& req, std::vector<int32_t>& ids) {
  switch (req.prompt_case()) {
    case pb::GenerateRequest::kText:
      // Checked here: with a BOS-adding vocabulary the empty text would still make one token.
      if (req.text().empty()) return invalid("the prompt is empty");
      ids = serving.text_prompt(req.text());
      return Status::OK;
    case pb::GenerateRequest::kTokenIds:
      ids.assign(req.token_ids().ids().begin(), req.token_ids().ids().end());
      return Status::OK;
    case pb::GenerateRequest::kMessages:
      return chat_prompt_ids(serving, req.messages(), ids);
    case pb::GenerateRequest::PROMPT_NOT_SET:
      break;
  }
  return invalid("the prompt is empty: set text, token_ids or messages");
}

Status submit(Serving& serving, const pb::GenerateRequest& req, std::shared_ptr<RequestStream>& stream) {
  const Clock::time_point arrival = Clock::now();
  std::vector<int32_t> ids;
  if (Status s = prompt_ids(serving, req, ids); !s.ok()) return s;
  SubmitResult r = serving.submit(std::move(ids), grpc_api::to_sampling_params(req), arrival, req.priority());
  if (!r.stream) return rejection_status(r);
  stream = std::move(r.stream);
  return Status::OK;
}

// Why the call should stop waiting for its request, if it should.
std::optional<Status> call_ended(const grpc::ServerContext& ctx) {
  if (std::chrono::system_clock::now() >= ctx.deadline()) {
    return Status(StatusCode::DEADLINE_EXCEEDED, "deadline exceeded");
  }
  if (ctx.IsCancelled()) return Status(StatusCode::CANCELLED, "cancelled by the client");
  return std::nullopt;
}

// Feeds the request's events to `sink` until it finishes. When the call ends first (deadline,
// client cancellation or disconnect) the engine request is cancelled, so its blocks are freed now
// rather than when it would have finished.
Status pump(Serving& serving, grpc::ServerContext& ctx, RequestStream& stream, const EventSink& sink) {
  for (;;) {
    if (std::optional<Status> ended = call_ended(ctx)) {
      serving.cancel(stream.req_id());
      return *ended;
    }
    std::optional<RequestOutput> o = stream.next(Clock::now() + kPollInterval);
    if (!o) continue;
    if (o->finish == FinishReason::Abort && !o->error.empty()) return {StatusCode::INTERNAL, o->error};
    if (!sink(*o)) {
      serving.cancel(stream.req_id());
      return {StatusCode::CANCELLED, "the client went away"};
    }
    if (o->finish) return Status::OK;
  }
}

class GenerationService final : public pb::Generation::Service {
 public:
  explicit GenerationService(Serving& serving) : serving_(serving) {}

  Status Generate(grpc::ServerContext* ctx, const pb::GenerateRequest* req, pb::GenerateResponse* resp) override {
    return guarded([&] { return generate(*ctx, *req, *resp); });
  }
  Status GenerateStream(grpc::ServerContext* ctx, const pb::GenerateRequest* req,
                        grpc::ServerWriter<pb::GenerateStreamResponse>* writer) override {
    return guarded([&] { return generate_stream(*ctx, *req, *writer); });
  }
  Status Tokenize(grpc::ServerContext*, const pb::TokenizeRequest* req, pb::TokenizeResponse* resp) override {
    return guarded([&] { return tokenize(*req, *resp); });
  }
  Status Detokenize(grpc::ServerContext*, const pb::DetokenizeRequest* req, pb::DetokenizeResponse* resp) override {
    return guarded([&] { return detokenize(*req, *resp); });
  }
  Status GetModelInfo(grpc::ServerContext*, const pb::GetModelInfoRequest*, pb::ModelInfo* info) override {
    return guarded([&] { return model_info(*info); });
  }

 private:
  static bool wants_logprobs(const pb::GenerateRequest& req) {
    return req.sampling().has_logprobs() && req.sampling().logprobs() >= 0;
  }

  Status generate(grpc::ServerContext& ctx, const pb::GenerateRequest& req, pb::GenerateResponse& resp) {
    std::shared_ptr<RequestStream> stream;
    if (Status s = submit(serving_, req, stream); !s.ok()) return s;
    resp.set_id(stream->req_id());
    std::string text;
    return pump(serving_, ctx, *stream, [&](const RequestOutput& o) {
      text += o.text;
      grpc_api::add_tokens(o.tokens, wants_logprobs(req), serving_.tokenizer(), resp.mutable_tokens());
      if (o.finish) {
        resp.set_text(std::move(text));
        resp.set_finish_reason(grpc_api::to_proto(*o.finish));
        grpc_api::fill_usage(o, resp.mutable_usage());
      }
      return true;
    });
  }

  Status generate_stream(grpc::ServerContext& ctx, const pb::GenerateRequest& req,
                         grpc::ServerWriter<pb::GenerateStreamResponse>& writer) {
    std::shared_ptr<RequestStream> stream;
    if (Status s = submit(serving_, req, stream); !s.ok()) return s;
    return pump(serving_, ctx, *stream, [&](const RequestOutput& o) {
      pb::GenerateStreamResponse msg;
      msg.set_id(stream->req_id());
      msg.set_text(o.text);
      grpc_api::add_tokens(o.tokens, wants_logprobs(req), serving_.tokenizer(), msg.mutable_tokens());
      if (o.finish) {
        msg.set_finish_reason(grpc_api::to_proto(*o.finish));
        grpc_api::fill_usage(o, msg.mutable_usage());
      }
      return writer.Write(msg);
    });
  }

  Status tokenize(const pb::TokenizeRequest& req, pb::TokenizeResponse& resp) {
    for (int32_t id : serving_.tokenizer().encode(req.text(), req.add_special_tokens(), /*parse_special=*/true)) {
      resp.add_ids(id);
    }
    return Status::OK;
  }

  Status detokenize(const pb::DetokenizeRequest& req, pb::DetokenizeResponse& resp) {
    const int32_t vocab = serving_.tokenizer().vocab_size();
    std::vector<int32_t> ids(req.ids().begin(), req.ids().end());
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab) {
        return invalid("token id " + std::to_string(id) + " is out of range [0, " + std::to_string(vocab) + ")");
      }
    }
    resp.set_text(grpc_api::valid_utf8(serving_.tokenizer().decode(ids)));
    return Status::OK;
  }

  Status model_info(pb::ModelInfo& info) {
    const ModelConfig& cfg = serving_.model().config();
    info.set_name(serving_.model_name());
    info.set_architecture(cfg.arch);
    info.set_context_length(cfg.context_len);
    info.set_vocab_size(cfg.vocab_size);
    info.set_num_layers(cfg.num_layers);
    info.set_hidden_size(cfg.dim);
    info.set_num_heads(cfg.num_heads);
    info.set_num_kv_heads(cfg.num_kv_heads);
    info.set_kv_cache_blocks(serving_.stats().num_kv_blocks);
    info.set_kv_cache_block_size(serving_.kv_block_size());
    return Status::OK;
  }

  Serving& serving_;
};

std::chrono::system_clock::time_point to_system(Clock::time_point t) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(t - Clock::now());
}

}  // namespace

struct GrpcServer::Impl {
  Impl(Serving& serving, std::string address) : service(serving), address(std::move(address)) {}
  GenerationService service;
  std::string address;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

GrpcServer::GrpcServer(Serving& serving, std::string address)
    : impl_(std::make_unique<Impl>(serving, std::move(address))) {}

GrpcServer::~GrpcServer() { stop(Clock::now()); }

void GrpcServer::start() {
  // Process-wide switch; it must be on before the builder runs for the server to get the service.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(impl_->address, grpc::InsecureServerCredentials(), &impl_->port);
  builder.RegisterService(&impl_->service);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0) {
    impl_->server.reset();
    throw std::runtime_error("gRPC server cannot listen on " + impl_->address);
  }
  grpc::HealthCheckServiceInterface* health = impl_->server->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus(pb::Generation::service_full_name(), true);
  spdlog::info("gRPC API listening on port {}", impl_->port);
}

void GrpcServer::set_not_serving() {
  if (impl_->server) impl_->server->GetHealthCheckService()->SetServingStatus(false);
}

void GrpcServer::stop(Clock::time_point deadline) {
  if (!impl_->server) return;
  impl_->server->Shutdown(to_system(deadline));
  impl_->server->Wait();
  impl_->server.reset();
}

int GrpcServer::port() const { return impl_->port; }

}  // namespace flashserve
