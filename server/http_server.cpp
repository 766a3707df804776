#include "server/http_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <stdexcept>
#include <thread>

#include "server/openai_generation.h"

namespace flashserve {
namespace {

using Handler = httplib::Server::Handler;
using HandlerResponse = httplib::Server::HandlerResponse;

// How long a worker waits for engine events before checking that its client is still there.
constexpr auto kPollSlice = std::chrono::milliseconds(50);

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.status, error_body(e)); }

// Every byte up to the longer length is compared, whatever differs first, so the time taken says
// nothing about how much of a guess was right.
bool same_secret(const std::string& given, const std::string& expected) {
  const size_t n = std::max(given.size(), expected.size());
  unsigned diff = given.size() != expected.size();
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < given.size() ? given[i] : 0;
    const unsigned char b = i < expected.size() ? expected[i] : 0;
    diff |= unsigned(a ^ b);
  }
  return diff == 0;
}

// A body for errors httplib raises itself (no route, body too large, unparsable HTTP).
ApiError status_error(const httplib::Request& req, int status, size_t max_body_bytes) {
  switch (status) {
    case 404:
      return ApiError(404, "no route for " + req.method + " " + req.path, "invalid_request_error", "", "not_found");
    case 405:
      return ApiError(405, req.method + " is not allowed on " + req.path, "invalid_request_error", "", "method_not_allowed");
    case 413:
      return ApiError(413, "the request body exceeds " + std::to_string(max_body_bytes) + " bytes",
                      "invalid_request_error", "", "request_too_large");
    default:
      return ApiError(status, "HTTP error " + std::to_string(status),
                      status >= 500 ? "server_error" : "invalid_request_error");
  }
}

// One slice of a generation response, on the HTTP worker. The 200 is already sent, so a failure can
// only end the response early; returning false drops the connection and, with it, the job, whose
// destruction cancels its engine requests. is_writable() peeks at the socket, so a client that
// closed its end is noticed within a slice even while nothing is being written.
bool pump(GenerationJob& job, httplib::DataSink& sink) {
  if (!sink.is_writable()) return false;
  try {
    bool last = false;
    const std::string out = job.advance(kPollSlice, last);
    if (!out.empty() && !sink.write(out.data(), out.size())) return false;
    if (last) sink.done();
    return true;
  } catch (const std::exception& e) {
    spdlog::error("generation response failed: {}", e.what());
    return false;
  }
}

}  // namespace

struct HttpServer::Impl {
  Impl(Serving& serving, std::function<std::string()> render_metrics, HttpOptions options)
      : serving(serving), render_metrics(std::move(render_metrics)), options(std::move(options)) {}

  void setup();
  // Wraps a handler: the API key check (when `authenticated`), and exceptions mapped to error JSON.
  Handler guarded(Handler handler, bool authenticated) const;
  void check_auth(const httplib::Request& req) const;

  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
  void models(httplib::Response& res) const;
  void ready(httplib::Response& res) const;
  void tokenize(const httplib::Request& req, httplib::Response& res) const;
  void detokenize(const httplib::Request& req, httplib::Response& res) const;

  Serving& serving;
  socket_t listen_socket = -1;  // set by the socket-options hook, before bind
  std::function<std::string()> render_metrics;
  HttpOptions options;
  const int64_t created = int64_t(std::time(nullptr));
  httplib::Server svr;
  std::thread listener;
  std::atomic<bool> listen_returned{false};
  int port = -1;
};

Handler HttpServer::Impl::guarded(Handler handler, bool authenticated) const {
  return [this, handler = std::move(handler), authenticated](const httplib::Request& req, httplib::Response& res) {
    try {
      if (authenticated) check_auth(req);
      handler(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      spdlog::error("{} {} failed: {}", req.method, req.path, e.what());
      send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"));
    } catch (...) {
      spdlog::error("{} {} failed with a non-standard exception", req.method, req.path);
      send_error(res, ApiError(500, "internal error", "server_error"));
    }
  };
}

void HttpServer::Impl::check_auth(const httplib::Request& req) const {
  if (options.api_key.empty()) return;
  static const std::string kBearer = "Bearer ";
  const std::string header = req.get_header_value("Authorization");
  const std::string given = header.starts_with(kBearer) ? header.substr(kBearer.size()) : std::string();
  if (!same_secret(given, options.api_key)) {
    throw ApiError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'", "invalid_request_error", "",
                   "invalid_api_key");
  }
}

void HttpServer::Impl::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  const auto arrival = Clock::now();
  const json body = parse_body(req.body);
  GenerationRequest request =
      endpoint == Endpoint::Chat ? parse_chat_request(body, serving) : parse_completion_request(body, serving);
  // Submitted here, so refusals (400/429/503) still get their status; the answer itself, even when
  // not streamed, goes out through a chunked provider: that is where a gone client can be noticed.
  auto job = std::make_shared<GenerationJob>(serving, std::move(request), arrival);
  if (job->content_type() == std::string("text/event-stream")) res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(job->content_type(),
                                   [job](size_t, httplib::DataSink& sink) { return pump(*job, sink); });
}

void HttpServer::Impl::models(httplib::Response& res) const {
  const json model = {{"id", serving.model_name()},
                      {"object", "model"},
                      {"created", created},
                      {"owned_by", "flashserve"},
                      {"max_model_len", serving.max_model_len()}};
  send_json(res, 200, {{"object", "list"}, {"data", json::array({model})}});
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

void HttpServer::Impl::setup() {
  svr.new_task_queue = [n = options.num_threads] { return new httplib::ThreadPool(size_t(std::max(1, n))); };
  svr.set_payload_max_length(options.max_body_bytes);
  svr.set_tcp_nodelay(true);  // stream chunks are small; don't let Nagle hold them back
  // httplib's default also sets SO_REUSEPORT, which would let a second server bind our port and
  // silently take half the connections; SO_REUSEADDR alone still allows a quick restart.
  svr.set_socket_options([this](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_socket = sock;
  });

  auto open = [this](Handler h) { return guarded(std::move(h), false); };
  auto api = [this](Handler h) { return guarded(std::move(h), true); };
  svr.Post("/v1/completions", api([this](const auto& req, auto& res) { generate(req, res, Endpoint::Completions); }));
  svr.Post("/v1/chat/completions", api([this](const auto& req, auto& res) { generate(req, res, Endpoint::Chat); }));
  svr.Get("/v1/models", api([this](const auto&, auto& res) { models(res); }));
  svr.Post("/tokenize", api([this](const auto& req, auto& res) { tokenize(req, res); }));
  svr.Post("/detokenize", api([this](const auto& req, auto& res) { detokenize(req, res); }));
  svr.Get("/health", open([](const auto&, auto& res) { send_json(res, 200, {{"status", "ok"}}); }));
  svr.Get("/ready", open([this](const auto&, auto& res) { ready(res); }));
  svr.Get("/metrics", open([this](const auto&, auto& res) {
    res.set_content(render_metrics ? render_metrics() : std::string(), "text/plain; version=0.0.4; charset=utf-8");
  }));

  // A known path with the wrong method: 405 (httplib alone would say 404).
  auto not_allowed = [](const char* allow) {
    return [allow](const httplib::Request&, httplib::Response& res) {
      res.status = 405;
      res.set_header("Allow", allow);
    };
  };
  for (const char* path : {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"}) {
    svr.Get(path, not_allowed("POST"));
  }
  for (const char* path : {"/v1/models", "/health", "/ready", "/metrics"}) svr.Post(path, not_allowed("GET"));

  svr.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return HandlerResponse::Unhandled;
        send_error(res, status_error(req, res.status, options.max_body_bytes));
        return HandlerResponse::Handled;
      }));
  svr.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    spdlog::debug("HTTP {} {} -> {}", req.method, req.path, res.status);
  });
}

HttpServer::HttpServer(Serving& serving, std::function<std::string()> render_metrics, HttpOptions options)
    : impl_(std::make_unique<Impl>(serving, std::move(render_metrics), std::move(options))) {
  impl_->setup();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::start() {
  Impl& s = *impl_;
  const HttpOptions& o = s.options;
  s.port = o.port == 0 ? s.svr.bind_to_any_port(o.host) : (s.svr.bind_to_port(o.host, o.port) ? o.port : -1);
  if (s.port < 0) throw std::runtime_error("cannot bind HTTP to " + o.host + ":" + std::to_string(o.port));
  // Debian's compiled httplib listens with a backlog of 5: a burst of connections overflows the
  // accept queue, and clients whose handshake completed wait on a server that never accepts them.
  // listen() again on the bound socket raises the backlog.
  ::listen(s.listen_socket, SOMAXCONN);
  s.listener = std::thread([&s] {
    s.svr.listen_after_bind();
    s.listen_returned = true;
  });
  // stop() is a no-op on a server not yet running; wait so a quick stop() cannot be lost.
  while (!s.svr.is_running() && !s.listen_returned) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (s.listen_returned) {
    s.listener.join();
    throw std::runtime_error("the HTTP listener on " + o.host + ":" + std::to_string(s.port) + " failed to start");
  }
}

void HttpServer::stop() {
  if (!impl_->listener.joinable()) return;
  impl_->svr.stop();
  impl_->listener.join();
}

int HttpServer::port() const { return impl_->port; }

}  // namespace flashserve
