// In-process HTTP tests: a Serving engine and an HttpServer on a free loopback port, JSON and SSE
// helpers, and a raw socket client that can hang up halfway through an answer.
#pragma once
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server/http_server.h"
#include "server/serving.h"
#include "tests/util/patient_client.h"
#include "tests/util/server_process.h"
#include "tests/util/test_paths.h"

namespace flashserve::test {

using json = nlohmann::json;

// Loaded once per test binary.
inline const Model& tiny_model() {
  static const std::unique_ptr<Model> model = Model::load(tiny_model_for_server());
  return *model;
}
inline const Model& smollm2() {
  static const std::unique_ptr<Model> model = Model::load(real_model_path());
  return *model;
}

// Remembers how every request ended, so a test can tell a cancel (Abort) from a natural finish.
class FinishWatcher : public ServingObserver {
 public:
  void on_output(const RequestOutput& o) override {
    if (!o.finish) return;
    std::lock_guard lock(mu_);
    finishes_.push_back(*o.finish);
    last_timings_ = o.timings;
    changed_.notify_all();
  }
  RequestTimings last_timings() const {
    std::lock_guard lock(mu_);
    return last_timings_;
  }
  void on_step(const StepStats&) override {}
  // The finishes so far, once there are `count` of them or `timeout` has passed. (The engine
  // publishes free blocks before it reports the finish, so a test that saw the blocks free must
  // still wait for the report.)
  std::vector<FinishReason> finishes(size_t count = 0,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(60)) const {
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, timeout, [&] { return finishes_.size() >= count; });
    return finishes_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::vector<FinishReason> finishes_;
  RequestTimings last_timings_;
};

inline EngineOptions test_engine_options(int64_t kv_cache_bytes = 1 << 20) {
  EngineOptions o;
  o.kv_cache_bytes = kv_cache_bytes;
  return o;
}

inline HttpOptions test_http_options() {
  HttpOptions o;
  o.port = 0;
  return o;
}

class HttpHarness {
 public:
  explicit HttpHarness(const Model& model, const EngineOptions& engine = test_engine_options(),
                       HttpOptions http = test_http_options())
      : serving(model, "test-model", engine, &recorder),
        server(serving, [] { return std::string("# flashserve test metrics\n"); }, std::move(http)) {
    server.start();
  }
  ~HttpHarness() { server.stop(); }

  httplib::Client client() const {
    httplib::Client c = test::patient_client(server.port());
    return c;
  }

  FinishWatcher recorder;
  Serving serving;
  HttpServer server;
};

struct Reply {
  int status = 0;
  json body;
  std::string text;  // the raw body
  std::string content_type;
  std::string retry_after;  // the Retry-After header, if any
};

inline Reply to_reply(const httplib::Result& r) {
  if (!r) return {-1, nullptr, "transport error: " + httplib::to_string(r.error()), "", ""};
  return {r->status, json::parse(r->body, nullptr, false), r->body, r->get_header_value("Content-Type"),
          r->get_header_value("Retry-After")};
}

inline Reply post(const HttpHarness& h, const std::string& path, const std::string& body,
                  const httplib::Headers& headers = {}) {
  auto c = h.client();
  return to_reply(c.Post(path.c_str(), headers, body, "application/json"));
}
inline Reply post(const HttpHarness& h, const std::string& path, const json& body, const httplib::Headers& headers = {}) {
  return post(h, path, body.dump(), headers);
}
inline Reply get(const HttpHarness& h, const std::string& path, const httplib::Headers& headers = {}) {
  auto c = h.client();
  return to_reply(c.Get(path.c_str(), headers));
}

// The `data:` payloads of an SSE body, in order ("[DONE]" kept as the string "[DONE]").
inline std::vector<json> sse_events(const std::string& body) {
  std::vector<json> events;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    const std::string payload = body.substr(pos + 6, end - pos - 6);
    events.push_back(payload == "[DONE]" ? json("[DONE]") : json::parse(payload, nullptr, false));
    pos = end;
  }
  return events;
}

// One event of an SSE stream: its `event:` name ("" if none) and its `data:` payload.
struct NamedEvent {
  std::string name;
  json data;
};

// The events of an SSE body with their names (the Responses and Messages streams), in order.
inline std::vector<NamedEvent> sse_named_events(const std::string& body) {
  std::vector<NamedEvent> events;
  for (size_t pos = 0, end; (end = body.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
    NamedEvent e;
    const std::string block = body.substr(pos, end - pos);
    for (size_t line = 0, eol; line < block.size(); line = eol + 1) {
      eol = std::min(block.find('\n', line), block.size());
      const std::string text = block.substr(line, eol - line);
      if (text.starts_with("event: ")) e.name = text.substr(7);
      if (text.starts_with("data: ")) e.data = json::parse(text.substr(6), nullptr, false);
    }
    events.push_back(std::move(e));
  }
  return events;
}

// True once nothing runs or waits and every KV block is free again, within `timeout`.
inline bool all_blocks_free(const Serving& serving, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const EngineStats s = serving.stats();
    if (s.num_running == 0 && s.num_waiting == 0 && s.num_free_kv_blocks == s.num_kv_blocks) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// One HTTP/1.1 request over a plain socket, read as far as the test likes, then hung up on.
class RawConnection {
 public:
  RawConnection(int port, const std::string& path, const std::string& body)
      : RawConnection(port, "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
                                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body) {}
  // Sends `bytes` as they are (any request, or part of one).
  RawConnection(int port, const std::string& bytes) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(uint16_t(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    send_more(bytes);
  }
  void send_more(const std::string& bytes) {
    for (size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may close early (e.g. 413 before the body)
      sent += size_t(n);
    }
  }
  ~RawConnection() { hang_up(); }

  // Reads until `needle` has been seen `count` times (or the peer closes); returns what was read.
  std::string read_until(const std::string& needle, int count = 1) {
    timeval tv{30, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[4096];
    while (occurrences(needle) < count) {
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n == 0) closed_by_peer_ = true;
      if (n <= 0) break;
      received_.append(buf, size_t(n));
    }
    return received_;
  }
  // The last read_until ended because the server closed the connection (not a timeout).
  bool closed_by_peer() const { return closed_by_peer_; }
  void hang_up() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int occurrences(const std::string& needle) const {
    int n = 0;
    for (size_t pos = received_.find(needle); pos != std::string::npos; pos = received_.find(needle, pos + 1)) ++n;
    return n;
  }
  int fd_ = -1;
  std::string received_;
  bool closed_by_peer_ = false;
};

}  // namespace flashserve::test
