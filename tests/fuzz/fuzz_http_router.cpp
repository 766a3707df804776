// libFuzzer target: cpp-httplib behind our framer, as the server runs it. Every request the framer
// completes from the input (several, for a pipelining client) goes to an HttpRouter whose routes
// are shaped like the real server's: JSON POSTs through parse_body (one of them deferred, as
// generation is), plain GETs, the regex route /v1/models/(.+), 405s, and the JSON error handler.
// handle() must not throw, and must answer with exactly one well-framed HTTP/1.1 response (its
// bytes go to the socket as they are), or defer with no bytes. The handlers stand in for the real
// ones, so no engine is built and an input runs in microseconds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "server/http_framing.h"
#include "tests/fuzz/finding.h"
#include "server/http_router.h"
#include "server/openai_protocol.h"
#include "server/openai_response.h"

namespace {

using namespace flashserve;
using Handler = httplib::Server::Handler;

// The server's head limit; a small body limit, so that libFuzzer's inputs cross it.
constexpr FramingLimits kLimits{32 << 10, 4 << 10};
constexpr int kMaxRequests = 8;  // per input: enough to pipeline, few enough to stay fast

[[noreturn]] void finding(const char* what, std::string_view detail) {
  fuzz::finding("fuzz_http_router", what, detail);
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

// As the server's handlers are wrapped: an ApiError is the client's, anything else a 500.
Handler guarded(Handler handler) {
  return [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    try {
      handler(req, res);
    } catch (const ApiError& e) {
      send_json(res, e.status, error_body(e));
    } catch (const std::exception& e) {
      send_json(res, 500, error_body(ApiError(500, e.what(), "server_error")));
    }
  };
}

// A deferred answer that never has bytes: what matters here is that handle() hands it over.
class Silent : public DeferredResponse {
 public:
  std::string advance(bool& done) override {
    done = true;
    return {};
  }
  std::string abandon() override { return {}; }
};

HttpRouter& router() {
  static HttpRouter* r = [] {
    auto* r = new HttpRouter;
    r->set_payload_max_length(kLimits.max_body_bytes);
    r->Post("/v1/completions", guarded([](const auto& req, auto& res) {
      send_json(res, 200, {{"fields", parse_body(req.body).size()}});
    }));
    r->Post("/v1/chat/completions", guarded([](const auto& req, auto&) {
      parse_body(req.body);
      if (HttpRouter::exchange().peer.ip.empty()) throw std::logic_error("no exchange");
      HttpRouter::defer(std::make_unique<Silent>());
    }));
    r->Get("/v1/models", guarded([](const auto&, auto& res) { send_json(res, 200, {{"object", "list"}}); }));
    r->Get("/v1/models/(.+)", guarded([](const auto& req, auto& res) {
      const std::string id = req.matches[1];
      if (id != "test-model") throw ApiError(404, "The model '" + id + "' does not exist", "invalid_request_error");
      send_json(res, 200, {{"id", id}});
    }));
    r->Get("/health", guarded([](const auto&, auto& res) { send_json(res, 200, {{"status", "ok"}}); }));
    r->Get("/v1/completions", [](const auto&, auto& res) {
      res.status = 405;
      res.set_header("Allow", "POST");
    });
    r->Post("/health", [](const auto&, auto& res) {
      res.status = 405;
      res.set_header("Allow", "GET");
    });
    r->set_error_handler(httplib::Server::HandlerWithResponse([](const auto& req, auto& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      send_json(res, res.status, error_body(ApiError(res.status, "HTTP error on " + req.path, "invalid_request_error")));
      return httplib::Server::HandlerResponse::Handled;
    }));
    return r;
  }();
  return *r;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// One response, framed so that a client reads exactly these bytes as one answer: a status line,
// headers, and a body as long as its Content-Length (none after HEAD, 1xx, 204 or 304).
void check_response(const std::string& request, const RoutedResponse& r, const std::string& method) {
  if (r.deferred) {
    if (!r.bytes.empty()) finding("a deferred exchange also wrote bytes", request);
    return;
  }
  const std::string& bytes = r.bytes;
  auto digit = [&](size_t i) { return i < bytes.size() && bytes[i] >= '0' && bytes[i] <= '9'; };
  if (!bytes.starts_with("HTTP/1.1 ") || !digit(9) || !digit(10) || !digit(11) || bytes.size() < 13 || bytes[12] != ' ') {
    finding("the answer does not start with an HTTP/1.1 status line", request + "\n---\n" + bytes);
  }
  const int status = std::stoi(bytes.substr(9, 3));
  const size_t head_end = bytes.find("\r\n\r\n");
  if (head_end == std::string::npos) finding("the answer's head does not end", request + "\n---\n" + bytes);
  const size_t body_size = bytes.size() - head_end - 4;
  int num_lengths = 0;
  size_t length = 0;
  for (size_t pos = bytes.find("\r\n") + 2; pos < head_end + 2;) {
    const size_t next = bytes.find("\r\n", pos);
    const std::string_view line = std::string_view(bytes).substr(pos, next - pos);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos && iequals(line.substr(0, colon), "Content-Length")) {
      ++num_lengths;
      length = size_t(std::strtoull(std::string(line.substr(colon + 1)).c_str(), nullptr, 10));
    }
    pos = next + 2;
  }
  const bool no_body = method == "HEAD" || status < 200 || status == 204 || status == 304;
  if (num_lengths > 1) finding("the answer has several Content-Lengths", request + "\n---\n" + bytes);
  if (no_body ? body_size != 0 : (num_lengths != 1 || length != body_size)) {
    finding("the answer's body does not match its framing", request + "\n---\n" + bytes);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  const ExchangeInfo info{Peer{"127.0.0.1", 40000}, {}, false, [] {}, [] { return false; }};
  for (int i = 0; i < kMaxRequests && !input.empty(); ++i) {
    RequestFramer framer(kLimits);
    if (framer.feed(input) != RequestFramer::State::Complete) break;
    RoutedResponse r;
    try {
      r = router().handle(framer.request(), info);
    } catch (const std::exception& e) {
      finding("handle() threw", framer.request() + "\n---\n" + e.what());
    }
    check_response(framer.request(), r, framer.method());
    input.remove_prefix(framer.consumed());
  }
  return 0;
}
