#include "server/grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "flashserve.grpc.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "server/grpc_convert.h"
#include "server/grpc_generation.h"
#include "server/grpc_reflection.h"
#include "server/tls.h"

namespace flashserve {
namespace {

namespace pb = ::flashserve::v1;
using grpc::Status;
using grpc::StatusCode;

// Every method takes raw bytes (so a bad message gets INVALID_ARGUMENT with a reason, not the
// library's bare INTERNAL) on the callback API (so no call holds a thread while it waits).
using RawService = pb::Generation::WithRawCallbackMethod_Generate<pb::Generation::WithRawCallbackMethod_GenerateStream<
    pb::Generation::WithRawCallbackMethod_Tokenize<pb::Generation::WithRawCallbackMethod_Detokenize<
        pb::Generation::WithRawCallbackMethod_GetModelInfo<pb::Generation::Service>>>>>;

class GenerationService final : public RawService {
 public:
  GenerationService(Serving& serving, const ApiKey& key) : serving_(serving), key_(key) {}

  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                     grpc::ByteBuffer* resp) override {
    return grpc_api::start_generate(ctx, req, resp, serving_, key_);
  }
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GenerateStream(grpc::CallbackServerContext* ctx,
                                                             const grpc::ByteBuffer* req) override {
    return grpc_api::start_generate_stream(ctx, req, serving_, key_);
  }
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                     grpc::ByteBuffer* resp) override {
    return answer<pb::TokenizeRequest>(ctx, req, resp, "TokenizeRequest", [&](const auto& r) { return tokenize(r); });
  }
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                       grpc::ByteBuffer* resp) override {
    return answer<pb::DetokenizeRequest>(ctx, req, resp, "DetokenizeRequest", [&](const auto& r) { return detokenize(r); });
  }
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                         grpc::ByteBuffer* resp) override {
    return answer<pb::GetModelInfoRequest>(ctx, req, resp, "GetModelInfoRequest", [&](const auto&) { return model_info(); });
  }

 private:
  // A quick unary method: checked, parsed, answered at once. Handlers never throw past here.
  template <typename Request, typename Handler>
  grpc::ServerUnaryReactor* answer(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req, grpc::ByteBuffer* resp,
                                   const char* what, Handler handler) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    Status s = grpc_api::check_auth(*ctx, key_);
    Request r;
    if (s.ok()) s = grpc_api::parse(*req, r, what);
    if (s.ok()) {
      try {
        auto [status, message] = handler(r);
        s = status;
        if (s.ok()) *resp = grpc_api::serialize(message);
      } catch (const std::exception& e) {
        spdlog::error("gRPC {} failed: {}", what, e.what());
        s = Status(StatusCode::INTERNAL, e.what());
      }
    }
    if (!s.ok()) serving_.count_rejected(grpc_api::rejection_reason(s));
    reactor->Finish(s);
    return reactor;
  }

  std::pair<Status, pb::TokenizeResponse> tokenize(const pb::TokenizeRequest& req) {
    pb::TokenizeResponse resp;
    if (req.text().size() > serving_.max_prompt_bytes()) {
      return {Status(StatusCode::OUT_OF_RANGE, "the text is longer than the context window can hold"), resp};
    }
    for (int32_t id : serving_.tokenizer().encode(req.text(), req.add_special_tokens(), /*parse_special=*/true)) {
      resp.add_ids(id);
    }
    return {Status::OK, resp};
  }

  std::pair<Status, pb::DetokenizeResponse> detokenize(const pb::DetokenizeRequest& req) {
    pb::DetokenizeResponse resp;
    const int32_t vocab = serving_.tokenizer().vocab_size();
    std::vector<int32_t> ids(req.ids().begin(), req.ids().end());
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab) {
        return {Status(StatusCode::INVALID_ARGUMENT,
                       "token id " + std::to_string(id) + " is out of range [0, " + std::to_string(vocab) + ")"),
                resp};
      }
    }
    resp.set_text(grpc_api::valid_utf8(serving_.tokenizer().decode(ids)));
    return {Status::OK, resp};
  }

  std::pair<Status, pb::ModelInfo> model_info() {
    pb::ModelInfo info;
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
    return {Status::OK, info};
  }

  Serving& serving_;
  const ApiKey& key_;
};

std::chrono::system_clock::time_point to_system(Clock::time_point t) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(t - Clock::now());
}

std::shared_ptr<grpc::ServerCredentials> credentials(const GrpcOptions& o) {
  if (o.tls_cert.empty() && o.tls_key.empty()) return grpc::InsecureServerCredentials();
  if (o.tls_cert.empty() || o.tls_key.empty()) throw std::invalid_argument("TLS needs both --tls-cert and --tls-key");
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({read_text_file(o.tls_key), read_text_file(o.tls_cert)});
  return grpc::SslServerCredentials(ssl);
}

void add_connection_limits(grpc::ServerBuilder& b, const GrpcOptions& o) {
  auto ms = [](int s) { return s * 1000; };
  if (o.keepalive_time_s > 0) {
    b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(o.keepalive_time_s));
    b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(o.keepalive_timeout_s));
    b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  }
  if (o.max_connection_idle_s > 0) b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ms(o.max_connection_idle_s));
  if (o.max_connection_age_s > 0) {
    b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, ms(o.max_connection_age_s));
    b.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, ms(o.max_connection_age_grace_s));
  }
  b.SetMaxReceiveMessageSize(int(std::min<size_t>(o.max_message_bytes, INT32_MAX)));
}

}  // namespace

struct GrpcServer::Impl {
  Impl(Serving& serving, GrpcOptions options)
      : options(std::move(options)), service(serving, this->options.api_key) {}
  GrpcOptions options;
  GenerationService service;
  // v1 beside gRPC's own v1alpha (the plugin); both list every service here.
  ReflectionV1Service reflection{{pb::Generation::service_full_name(), "grpc.health.v1.Health",
                                  "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}};
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

GrpcServer::GrpcServer(Serving& serving, GrpcOptions options)
    : impl_(std::make_unique<Impl>(serving, std::move(options))) {}

GrpcServer::~GrpcServer() { stop(Clock::now()); }

void GrpcServer::start() {
  // Process-wide switches; they must be on before the builder runs for the server to get them.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(impl_->options.address, credentials(impl_->options), &impl_->port);
  add_connection_limits(builder, impl_->options);
  builder.RegisterService(&impl_->service);
  builder.RegisterService(&impl_->reflection);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || impl_->port == 0) {
    impl_->server.reset();
    throw std::runtime_error("gRPC server cannot listen on " + impl_->options.address);
  }
  // Links the health service's descriptors in (proto/grpc/health/v1/health.proto): reflection finds
  // them in the generated pool and can describe the service, not only list it.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::HealthCheckServiceInterface* health = impl_->server->GetHealthCheckService();
  health->SetServingStatus("", true);
  health->SetServingStatus(pb::Generation::service_full_name(), true);
  spdlog::info("gRPC API listening on port {}{}", impl_->port, impl_->options.tls_cert.empty() ? "" : " (TLS)");
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
