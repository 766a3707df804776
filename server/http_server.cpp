#include "server/http_server.h"

#include <spdlog/spdlog.h>

#include <ctime>
#include <stdexcept>

#include "server/cors.h"
#include "server/embeddings.h"
#include "server/load_report.h"
#include "server/http_loop.h"
#include "server/http_router.h"
#include "server/http_wire.h"
#include "server/messages_request.h"
#include "server/messages_writer.h"
#include "server/openai_generation.h"
#include "server/openai_response.h"
#include "server/responses_request.h"
#include "server/responses_writer.h"
#include "server/tls.h"

namespace flashserve {
namespace {

using Handler = httplib::Server::Handler;
using HandlerResponse = httplib::Server::HandlerResponse;

// Which API a route belongs to: it decides the shape of its errors and how its clients send a key.
enum class Api { OpenAi, Anthropic };

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e, Api api = Api::OpenAi) {
  if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
  if (e.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  send_json(res, e.status, api == Api::Anthropic ? anthropic_error_body(e) : error_body(e));
}

// A body for errors httplib raises itself (no route, unparsable request line or headers).
ApiError status_error(const httplib::Request& req, int status) {
  switch (status) {
    case 404:
      return ApiError(404, "no route for " + req.method + " " + req.path, "invalid_request_error", "", "not_found");
    case 405:
      return ApiError(405, req.method + " is not allowed on " + req.path, "invalid_request_error", "", "method_not_allowed");
    default:
      return ApiError(status, "HTTP error " + std::to_string(status),
                      status >= 500 ? "server_error" : "invalid_request_error");
  }
}

std::chrono::milliseconds millis(double seconds) { return std::chrono::milliseconds(int64_t(seconds * 1000)); }

}  // namespace

struct HttpServer::Impl : HttpHandler {
  Impl(Serving& serving, std::function<std::string()> render_metrics, HttpOptions options)
      : serving(serving),
        render_metrics(std::move(render_metrics)),
        options(std::move(options)),
        cors(this->options.allowed_origins),
        responses(this->options.max_stored_responses, this->options.stored_responses_mib << 20) {}

  void setup_routes();
  // Wraps a handler: the API key check (when `authenticated`), and exceptions mapped to error JSON
  // in `api`'s shape.
  Handler guarded(Handler handler, bool authenticated, Api api = Api::OpenAi) const;
  void check_auth(const httplib::Request& req, Api api) const;

  void generate(const httplib::Request& req, Endpoint endpoint);
  void create_response(const httplib::Request& req);
  void embed(const httplib::Request& req);
  void create_message(const httplib::Request& req);
  StoredResponse stored_response(const httplib::Request& req);
  json model_card() const;
  void ready(httplib::Response& res) const;
  void tokenize(const httplib::Request& req, httplib::Response& res) const;
  void detokenize(const httplib::Request& req, httplib::Response& res) const;
  void preflight(const httplib::Request& req, httplib::Response& res) const;

  // HttpHandler
  bool runs_inline(std::string_view method, std::string_view target) const override;
  RoutedResponse handle(const std::string& request, const ExchangeInfo& info) override;
  std::string refusal(int status, const std::string& message, std::string_view reason, bool close) override;

  Serving& serving;
  std::function<std::string()> render_metrics;
  HttpOptions options;
  CorsPolicy cors;
  ResponseStore responses;
  const int64_t created = int64_t(std::time(nullptr));
  HttpRouter router;
  std::unique_ptr<TlsContext> tls;
  std::unique_ptr<HttpLoop> loop;
};

Handler HttpServer::Impl::guarded(Handler handler, bool authenticated, Api api) const {
  return [this, handler = std::move(handler), authenticated, api](const httplib::Request& req, httplib::Response& res) {
    try {
      if (authenticated) check_auth(req, api);
      handler(req, res);
    } catch (const ApiError& e) {
      serving.count_rejected(rejection_reason(e));
      send_error(res, e, api);
    } catch (const std::exception& e) {
      spdlog::error("{} {} failed: {}", req.method, req.path, e.what());
      send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"), api);
    } catch (...) {
      spdlog::error("{} {} failed with a non-standard exception", req.method, req.path);
      send_error(res, ApiError(500, "internal error", "server_error"), api);
    }
  };
}

// Anthropic's clients send the key as "x-api-key: <key>"; a bearer key is taken there too.
void HttpServer::Impl::check_auth(const httplib::Request& req, Api api) const {
  if (options.api_key.accepts(req.get_header_value("Authorization"))) return;
  const bool has_x_api_key = api == Api::Anthropic && req.has_header("x-api-key");
  if (has_x_api_key && options.api_key.accepts_key(req.get_header_value("x-api-key"))) return;
  const char* how = api == Api::Anthropic ? "send 'x-api-key: <key>' or 'Authorization: Bearer <key>'"
                                          : "send 'Authorization: Bearer <key>'";
  throw ApiError(401, std::string("missing or wrong API key: ") + how, "invalid_request_error", "", "invalid_api_key");
}

void HttpServer::Impl::generate(const httplib::Request& req, Endpoint endpoint) {
  const json body = parse_body(req.body);
  const std::function<bool()>& cancelled = HttpRouter::exchange().cancelled;
  GenerationRequest request = endpoint == Endpoint::Chat ? parse_chat_request(body, serving, cancelled)
                                                         : parse_completion_request(body, serving, cancelled);
  auto make_writer = [this](const GenerationRequest& r) {
    return std::make_unique<ResponseBuilder>(r, serving.tokenizer(), serving.model_name(), serving.system_fingerprint());
  };
  HttpRouter::defer(std::make_unique<GenerationJob>(serving, std::move(request), HttpRouter::exchange(),
                                                    cors.answer_headers(req.get_header_value("Origin")), make_writer));
}

void HttpServer::Impl::create_response(const httplib::Request& req) {
  const json body = parse_body(req.body);
  const std::function<bool()>& cancelled = HttpRouter::exchange().cancelled;
  auto r = std::make_shared<ResponsesRequest>(parse_responses_request(body, serving, responses, cancelled));
  auto make_writer = [this, r](const GenerationRequest& g) {
    return std::make_unique<ResponsesWriter>(g, std::move(r->echo), std::move(r->conversation),
                                             r->store ? &responses : nullptr);
  };
  HttpRouter::defer(std::make_unique<GenerationJob>(serving, std::move(r->generation), HttpRouter::exchange(),
                                                    cors.answer_headers(req.get_header_value("Origin")), make_writer));
}

void HttpServer::Impl::embed(const httplib::Request& req) {
  auto r = std::make_shared<EmbeddingsRequest>(parse_embeddings_request(parse_body(req.body), serving));
  auto make_writer = [this, r](const GenerationRequest& g) {
    return std::make_unique<EmbeddingsWriter>(g, r->base64, serving.model_name());
  };
  HttpRouter::defer(std::make_unique<GenerationJob>(serving, std::move(r->generation), HttpRouter::exchange(),
                                                    cors.answer_headers(req.get_header_value("Origin")), make_writer));
}

// The `anthropic-version` header is a client's version pin; any value is served the same (the
// shapes here are the current ones), so it is not checked.
void HttpServer::Impl::create_message(const httplib::Request& req) {
  const json body = parse_body(req.body);
  const std::function<bool()>& cancelled = HttpRouter::exchange().cancelled;
  auto r = std::make_shared<MessagesRequest>(parse_messages_request(body, serving, cancelled));
  auto make_writer = [this, r](const GenerationRequest& g) {
    return std::make_unique<MessagesWriter>(g, std::move(r->stop_sequences), serving.model_name());
  };
  HttpRouter::defer(std::make_unique<GenerationJob>(serving, std::move(r->generation), HttpRouter::exchange(),
                                                    cors.answer_headers(req.get_header_value("Origin")), make_writer));
}

StoredResponse HttpServer::Impl::stored_response(const httplib::Request& req) {
  const std::string id = req.matches[1];
  std::optional<StoredResponse> stored = responses.get(id);
  if (!stored) {
    throw ApiError(404, "No response with id '" + id + "' is stored here", "invalid_request_error", "response_id",
                   "not_found");
  }
  return std::move(*stored);
}

// A browser's CORS preflight: answered for an allowed origin (no API key: browsers send none here),
// refused for any other.
void HttpServer::Impl::preflight(const httplib::Request& req, httplib::Response& res) const {
  const std::string origin = req.get_header_value("Origin");
  if (!cors.allows(origin)) {
    send_error(res, ApiError(403, "origin '" + origin + "' is not allowed (--allowed-origins)", "invalid_request_error",
                             "", "origin_not_allowed"));
    return;
  }
  // Access-Control-Allow-Origin comes with every answer (the post-routing handler): a second copy
  // here would make browsers refuse the answer.
  for (const auto& [name, value] : CorsPolicy::preflight_headers(req.get_header_value("Access-Control-Request-Headers"))) {
    res.set_header(name, value);
  }
  res.status = 204;
}

json HttpServer::Impl::model_card() const {
  return {{"id", serving.model_name()},
          {"object", "model"},
          {"created", created},
          {"owned_by", "flashserve"},
          {"max_model_len", serving.max_model_len()}};
}

void HttpServer::Impl::ready(httplib::Response& res) const {
  if (serving.ready()) {
    send_json(res, 200, {{"status", "ready"}});
    return;
  }
  const char* reason = serving.draining() ? "draining: the server is shutting down" : "the engine loop is not responding";
  send_json(res, 503, {{"status", "not ready"}, {"reason", reason}});
}

void HttpServer::Impl::tokenize(const httplib::Request& req, httplib::Response& res) const {
  const std::vector<int32_t> ids = parse_tokenize_request(parse_body(req.body), serving);
  send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", serving.max_model_len()}});
}

void HttpServer::Impl::detokenize(const httplib::Request& req, httplib::Response& res) const {
  const std::vector<int32_t> ids = parse_detokenize_request(parse_body(req.body), serving);
  send_json(res, 200, {{"prompt", serving.tokenizer().decode(ids)}});
}

void HttpServer::Impl::setup_routes() {
  router.set_payload_max_length(options.max_body_bytes);
  auto open = [this](Handler h) { return guarded(std::move(h), false); };
  auto api = [this](Handler h) { return guarded(std::move(h), true); };
  auto anthropic = [this](Handler h) { return guarded(std::move(h), true, Api::Anthropic); };
  router.Post("/v1/completions", api([this](const auto& req, auto&) { generate(req, Endpoint::Completions); }));
  router.Post("/v1/chat/completions", api([this](const auto& req, auto&) { generate(req, Endpoint::Chat); }));
  router.Post("/v1/embeddings", api([this](const auto& req, auto&) { embed(req); }));
  router.Post("/v1/responses", api([this](const auto& req, auto&) { create_response(req); }));
  router.Get("/v1/responses/([^/]+)", api([this](const auto& req, auto& res) {
    send_json(res, 200, stored_response(req).response);
  }));
  router.Delete("/v1/responses/([^/]+)", api([this](const auto& req, auto& res) {
    const std::string id = stored_response(req).response["id"];
    responses.erase(id);
    send_json(res, 200, {{"id", id}, {"object", "response"}, {"deleted", true}});
  }));
  router.Post("/v1/messages", anthropic([this](const auto& req, auto&) { create_message(req); }));
  router.Post("/v1/messages/count_tokens", anthropic([this](const auto& req, auto& res) {
    const std::function<bool()>& cancelled = HttpRouter::exchange().cancelled;
    send_json(res, 200, {{"input_tokens", count_message_tokens(parse_body(req.body), serving, cancelled)}});
  }));
  router.Get("/v1/models", api([this](const auto&, auto& res) {
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_card()})}});
  }));
  router.Get("/v1/models/(.+)", api([this](const auto& req, auto& res) {
    const std::string id = req.matches[1];
    if (id != serving.model_name()) {
      throw ApiError(404, "The model '" + id + "' does not exist", "invalid_request_error", "model", "model_not_found");
    }
    send_json(res, 200, model_card());
  }));
  // A router's load monitor (smg polls it; its query string asks for parts, all of which come).
  router.Get("/v1/loads", api([this](const auto&, auto& res) {
    send_json(res, 200, load_report({serving.stats(), serving.kv_block_size(), serving.max_num_seqs(),
                                     loop ? loop->num_queued() : 0}));
  }));
  router.Post("/tokenize", api([this](const auto& req, auto& res) { tokenize(req, res); }));
  router.Post("/detokenize", api([this](const auto& req, auto& res) { detokenize(req, res); }));
  router.Get("/health", open([](const auto&, auto& res) { send_json(res, 200, {{"status", "ok"}}); }));
  router.Get("/ready", open([this](const auto&, auto& res) { ready(res); }));
  router.Get("/metrics", open([this](const auto&, auto& res) {
    res.set_content(render_metrics ? render_metrics() : std::string(), "text/plain; version=0.0.4; charset=utf-8");
  }));

  // A known path with the wrong method: 405 (httplib alone would say 404).
  auto not_allowed = [](const char* allow) {
    return [allow](const httplib::Request&, httplib::Response& res) {
      res.status = 405;
      res.set_header("Allow", allow);
    };
  };
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/messages",
                           "/v1/messages/count_tokens", "/tokenize", "/detokenize"}) {
    router.Get(path, not_allowed("POST"));
  }
  for (const char* path : {"/v1/models", "/v1/loads", "/health", "/ready", "/metrics"}) router.Post(path, not_allowed("GET"));

  if (cors.enabled()) {
    router.Options(R"(/.*)", guarded([this](const auto& req, auto& res) { preflight(req, res); }, false));
    // Every answer httplib writes; deferred ones (generation) add the same headers themselves.
    router.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      for (const auto& [name, value] : cors.answer_headers(req.get_header_value("Origin"))) res.set_header(name, value);
    });
  }

  router.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return HandlerResponse::Unhandled;
    send_error(res, status_error(req, res.status));
    return HandlerResponse::Handled;
  }));
}

// Health, readiness, metrics and what a router polls (models, loads) must answer under any load,
// so they never wait for a worker.
bool HttpServer::Impl::runs_inline(std::string_view method, std::string_view target) const {
  if (method != "GET") return false;
  const std::string_view path = target.substr(0, target.find('?'));
  return path == "/health" || path == "/ready" || path == "/metrics" || path == "/v1/models" ||
         path.starts_with("/v1/models/") || path == "/v1/loads";
}

RoutedResponse HttpServer::Impl::handle(const std::string& request, const ExchangeInfo& info) {
  return router.handle(request, info);
}

std::string HttpServer::Impl::refusal(int status, const std::string& message, std::string_view reason, bool close) {
  serving.count_rejected(reason);
  ApiError e(status, message, status >= 500 ? "server_error" : status == 429 ? "rate_limit_error" : "invalid_request_error",
             "", std::string(reason));
  HeaderList headers;
  if (status == 429 || status == 503) headers.emplace_back("Retry-After", "1");
  return http_response(status, "application/json", dump(error_body(e)), headers, close);
}

HttpServer::HttpServer(Serving& serving, std::function<std::string()> render_metrics, HttpOptions options)
    : impl_(std::make_unique<Impl>(serving, std::move(render_metrics), std::move(options))) {
  impl_->setup_routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  Impl& s = *impl_;
  const HttpOptions& o = s.options;
  if (!o.tls_cert.empty() || !o.tls_key.empty()) {
    if (o.tls_cert.empty() || o.tls_key.empty()) throw std::invalid_argument("TLS needs both --tls-cert and --tls-key");
    s.tls = std::make_unique<TlsContext>(o.tls_cert, o.tls_key);
  }
  HttpLoopOptions lo;
  lo.host = o.host;
  lo.port = o.port;
  lo.max_body_bytes = o.max_body_bytes;
  lo.max_buffered_bytes = o.max_buffered_bytes;
  lo.num_workers = o.num_threads;
  lo.max_queued = o.max_queued;
  lo.max_queue_time = millis(o.max_queue_time_s);
  lo.max_connections = o.max_connections;
  lo.idle_timeout = millis(o.idle_timeout_s);
  lo.request_timeout = millis(o.request_timeout_s);
  lo.tls = s.tls.get();
  s.loop = std::make_unique<HttpLoop>(s, lo);
  s.loop->start();
}

void HttpServer::set_draining() {
  if (impl_->loop) impl_->loop->set_draining();
}

void HttpServer::stop(std::chrono::steady_clock::time_point deadline) {
  if (impl_->loop) impl_->loop->stop(deadline);
}

int HttpServer::port() const { return impl_->loop ? impl_->loop->port() : -1; }

size_t HttpServer::num_queued() const { return impl_->loop ? impl_->loop->num_queued() : 0; }

}  // namespace flashserve
