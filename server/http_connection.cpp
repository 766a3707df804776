#include "server/http_connection.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace flashserve {

int listen_socket(const std::string& host, int port, int& bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res) != 0 || !res) {
    throw std::runtime_error("cannot resolve HTTP host " + host);
  }
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR for a quick restart; never SO_REUSEPORT, which would let a second server bind
    // our port and silently take half the connections.
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) throw std::runtime_error("cannot bind HTTP to " + host + ":" + service + ": " + std::strerror(errno));
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  bound_port = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}

Peer peer_of(const sockaddr_storage& addr) {
  char ip[INET6_ADDRSTRLEN] = "";
  Peer p;
  if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
    p.port = ntohs(a->sin6_port);
  } else {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
    p.port = ntohs(a->sin_port);
  }
  p.ip = ip;
  return p;
}

Connection::Connection(uint64_t id, int fd, SSL* ssl, Peer peer, FramingLimits limits)
    : id(id), fd(fd), peer(std::move(peer)), framer(limits), last_progress(std::chrono::steady_clock::now()),
      ssl_(ssl), limits_(limits) {}

bool Connection::handshaking() const { return ssl_ && !SSL_is_init_finished(ssl_); }

Connection::~Connection() {
  deferred.reset();
  if (ssl_) SSL_free(ssl_);
  ::close(fd);
}

void Connection::next_request() {
  ++requests_done;
  framer = RequestFramer(limits_);
  continue_sent = false;
  phase = in.empty() ? Phase::Idle : Phase::Reading;
  request_start = std::chrono::steady_clock::now();
}

void Connection::start_lingering(std::chrono::steady_clock::time_point until) {
  phase = Phase::Lingering;
  linger_until = until;
  in.clear();
  if (ssl_) SSL_shutdown(ssl_);  // close_notify, best effort on a non-blocking socket
  ::shutdown(fd, SHUT_WR);
}

Connection::Io Connection::read_some(size_t max_bytes) {
  char buf[16384];
  bool progressed = false;
  while (in.size() < max_bytes) {
    const size_t want = std::min(sizeof(buf), max_bytes - in.size());
    ssize_t n;
    if (ssl_) {
      tls_wants_write_ = false;
      ERR_clear_error();
      n = SSL_read(ssl_, buf, int(want));
      if (n <= 0) {
        const int err = SSL_get_error(ssl_, int(n));
        if (err == SSL_ERROR_WANT_READ) break;
        if (err == SSL_ERROR_WANT_WRITE) {
          tls_wants_write_ = true;
          break;
        }
        return Io::Closed;  // close_notify, a reset, or a failed handshake
      }
    } else {
      n = ::recv(fd, buf, want, 0);
      if (n == 0) return Io::Closed;
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        return Io::Closed;
      }
    }
    in.append(buf, size_t(n));
    progressed = true;
  }
  if (progressed) last_progress = std::chrono::steady_clock::now();
  return progressed ? Io::Progress : Io::WouldBlock;
}

Connection::Io Connection::write_some() {
  bool progressed = false;
  while (out_pos < out.size()) {
    const size_t want = std::min<size_t>(out.size() - out_pos, 1 << 20);
    ssize_t n;
    if (ssl_) {
      tls_wants_write_ = false;
      ERR_clear_error();
      n = SSL_write(ssl_, out.data() + out_pos, int(want));
      if (n <= 0) {
        const int err = SSL_get_error(ssl_, int(n));
        if (err == SSL_ERROR_WANT_WRITE) {
          tls_wants_write_ = true;
          break;
        }
        if (err == SSL_ERROR_WANT_READ) break;
        return Io::Closed;
      }
    } else {
      n = ::send(fd, out.data() + out_pos, want, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == EINTR) continue;
        return Io::Closed;
      }
    }
    out_pos += size_t(n);
    progressed = true;
  }
  if (out_pos == out.size()) {
    out.clear();
    out_pos = 0;
  }
  if (progressed) last_progress = std::chrono::steady_clock::now();
  return progressed ? Io::Progress : Io::WouldBlock;
}

}  // namespace flashserve
