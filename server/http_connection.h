// One client connection as the event loop holds it: non-blocking socket I/O (plain or TLS), the
// bytes read and not yet used, the bytes still to send, and where its current exchange stands.
#pragma once
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include "server/http_framing.h"
#include "server/http_exchange.h"
#include "server/tls.h"

namespace flashserve {

// A non-blocking listening socket bound to host:port (0: any free port, returned in bound_port),
// with SOMAXCONN backlog. Throws std::runtime_error naming the address when it cannot bind.
int listen_socket(const std::string& host, int port, int& bound_port);
Peer peer_of(const sockaddr_storage& addr);

class Connection {
 public:
  enum class Phase {
    Idle,        // between requests: no byte of the next one yet
    Reading,     // part of a request has arrived
    Handling,    // a whole request is with a worker
    Responding,  // sending an answer, or waiting for engine events to send (deferred)
    Lingering,   // answered and closing: our side is shut, what the client still sends is discarded
  };
  enum class Io { Progress, WouldBlock, Closed };

  Connection(uint64_t id, int fd, SSL* ssl, Peer peer, FramingLimits limits);
  ~Connection();  // closes the socket (the deferred answer, if any, goes first, cancelling its work)
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Appends what the socket has, up to `max_bytes` held in `in` in all.
  Io read_some(size_t max_bytes);
  // Sends from `out` until it is empty or the socket is full.
  Io write_some();
  // TLS may need the socket writable to make progress on a read (or the reverse).
  bool tls_wants_write() const { return tls_wants_write_; }
  bool has_output() const { return out_pos < out.size(); }
  // TLS whose handshake has not finished: no request can have begun yet, but the client owes us
  // bytes, so the request timeout applies rather than the idle one.
  bool handshaking() const;
  // Starts the next request: a fresh framer, the phase back to Idle.
  void next_request();
  // Shuts our sending side after the last answer. Closing at once while the client is still
  // sending (a body we refused at its head) would make the kernel reset the connection, and the
  // reset can destroy the answer before the client reads it.
  void start_lingering(std::chrono::steady_clock::time_point until);

  const uint64_t id;
  const int fd;
  const Peer peer;
  Phase phase = Phase::Idle;
  std::string in;            // received, not yet framed into a request
  std::string out;           // to send, from out_pos
  size_t out_pos = 0;
  RequestFramer framer;
  bool continue_sent = false;
  int64_t requests_done = 0;  // answered on this connection
  bool close_after_write = false;
  size_t budget_charged = 0;  // bytes of the shared request-buffer budget this connection holds
  std::unique_ptr<DeferredResponse> deferred;
  std::chrono::steady_clock::time_point request_start;  // first byte of the current request
  std::chrono::steady_clock::time_point last_progress;  // last byte read or written
  const std::chrono::steady_clock::time_point accepted = last_progress;
  std::chrono::steady_clock::time_point linger_until;
  uint32_t interest = 0;     // epoll events registered

 private:
  SSL* ssl_;
  bool tls_wants_write_ = false;
  FramingLimits limits_;
};

}  // namespace flashserve
