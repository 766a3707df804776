#include "server/http_router.h"

#include <stdexcept>

namespace flashserve {
namespace {

// httplib reads the request from, and writes the response to, memory.
class BufferStream : public httplib::Stream {
 public:
  BufferStream(const std::string& in, const Peer& peer) : in_(in), peer_(peer) {}

  bool is_readable() const override { return pos_ < in_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, in_.size() - pos_);
    in_.copy(ptr, n, pos_);
    pos_ += n;
    return ssize_t(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (!discard_) out_.append(ptr, size);
    return ssize_t(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = peer_.ip;
    port = peer_.port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip.clear();
    port = 0;
  }
  socket_t socket() const override { return INVALID_SOCKET; }

  void discard_output() {
    discard_ = true;
    out_.clear();
  }
  std::string take_output() { return std::move(out_); }

 private:
  const std::string& in_;
  const Peer& peer_;
  size_t pos_ = 0;
  std::string out_;
  bool discard_ = false;
};

// The exchange being handled on this thread. httplib gives handlers no per-request slot of our
// own, and handle() runs one exchange at a time per thread, so a thread-local is the narrowest home.
struct Exchange {
  BufferStream* stream;
  ExchangeInfo info;
  std::unique_ptr<DeferredResponse> deferred;
};
thread_local Exchange* current = nullptr;

}  // namespace

RoutedResponse HttpRouter::handle(const std::string& request, const ExchangeInfo& info) {
  BufferStream stream(request, info.peer);
  Exchange exchange{&stream, info, nullptr};
  current = &exchange;
  bool client_closes = false;
  process_request(stream, info.closing, client_closes, [&](httplib::Request& req) {
    const bool http10 = req.version == "HTTP/1.0" && req.get_header_value("Connection") != "Keep-Alive";
    exchange.info.closing = info.closing || http10 || req.get_header_value("Connection") == "close";
  });
  current = nullptr;
  RoutedResponse r;
  r.close = exchange.info.closing || client_closes;
  r.deferred = std::move(exchange.deferred);
  if (!r.deferred) r.bytes = stream.take_output();
  return r;
}

const ExchangeInfo& HttpRouter::exchange() {
  if (!current) throw std::logic_error("HttpRouter::exchange outside a handler");
  return current->info;
}

void HttpRouter::defer(std::unique_ptr<DeferredResponse> deferred) {
  if (!current) throw std::logic_error("HttpRouter::defer outside a handler");
  current->stream->discard_output();
  current->deferred = std::move(deferred);
}

}  // namespace flashserve
