// The HTTP front door's event loop: one thread owns every client socket (epoll), so thousands of
// open streams cost memory, not threads. It reads and frames requests under deadlines, answers
// cheap routes itself, hands the rest to a small bounded worker pool, and streams deferred answers
// as engine events arrive. Nothing waits unseen: a full worker queue, too many connections or too
// many request bytes in memory are answered at once (429/503), and idle or trickling clients are
// cut off by timeouts.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include "server/http_exchange.h"

namespace flashserve {

class TlsContext;

struct HttpLoopOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                    // 0: any free port
  size_t max_head_bytes = 32 << 10;
  size_t max_body_bytes = 16 << 20;
  size_t max_buffered_bytes = 256 << 20;  // request bytes held at once: being read or queued
  int num_workers = 4;
  size_t max_queued = 1024;           // requests waiting for a worker
  std::chrono::milliseconds max_queue_time{0};  // a request not with a worker by then gets 429 (0: never)
  int max_connections = 10000;
  std::chrono::milliseconds idle_timeout{30000};     // no byte of a new request, or no progress sending
  std::chrono::milliseconds request_timeout{10000};  // a whole request (head and body) must arrive in this
  const TlsContext* tls = nullptr;
};

// What the loop serves.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Cheap routes answered on the loop thread itself (health, readiness, metrics), so they answer
  // under any load.
  virtual bool runs_inline(std::string_view method, std::string_view target) const = 0;
  virtual RoutedResponse handle(const std::string& request, const ExchangeInfo& info) = 0;
  // An answer the loop gives on its own (timeout, overload, limits), with the reason for metrics.
  virtual std::string refusal(int status, const std::string& message, std::string_view reason, bool close) = 0;
};

class HttpLoop {
 public:
  HttpLoop(HttpHandler& handler, HttpLoopOptions options);
  ~HttpLoop();
  // Binds and starts the loop thread; throws std::runtime_error if it cannot bind.
  void start();
  int port() const;
  // From now on every answer closes its connection, and idle connections are closed.
  void set_draining();
  // Ends deferred answers with their final bytes, gives them until `deadline` to be sent, then
  // closes every connection and joins the loop and the workers.
  void stop(std::chrono::steady_clock::time_point deadline);
  size_t num_queued() const;  // requests waiting for a worker

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve
