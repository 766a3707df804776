// What the HTTP event loop and the handlers it runs say to each other about one exchange, without
// the HTTP library: who asked, when, and how a handler answers later from engine events.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace flashserve {

struct Peer {
  std::string ip;
  int port = 0;
};

struct ExchangeInfo {
  Peer peer;
  std::chrono::steady_clock::time_point arrival;  // the request's first byte
  bool closing = false;  // the connection ends after this answer (draining, or the client asked)
  std::function<void()> wake;  // a deferred answer calls this (any thread) when it has bytes to send
  // True once the answer can no longer matter: the client hung up or the server is stopping. Long
  // work in a handler (a grammar compile) asks it and gives up. Empty for inline routes.
  std::function<bool()> cancelled;
};

// An answer given after its handler returned; the connection owns it until it is done, and drops it
// (cancelling its work) if the client goes away first.
class DeferredResponse {
 public:
  virtual ~DeferredResponse() = default;
  // Bytes to send now (possibly none), read without waiting. `done` is set with the last bytes.
  virtual std::string advance(bool& done) = 0;
  // The server is stopping: the bytes that end the response now (a final event, or an error).
  virtual std::string abandon() = 0;
};

// How a handled request is answered: bytes now, or later by `deferred`.
struct RoutedResponse {
  std::string bytes;
  std::unique_ptr<DeferredResponse> deferred;
  bool close = false;  // the connection ends after this answer
};

}  // namespace flashserve
