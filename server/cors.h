// Cross-origin requests from browser apps (CORS): off unless --allowed-origins names the origins
// allowed (or "*" for any). An allowed origin gets Access-Control-Allow-Origin on every answer,
// streamed ones included, and its preflight (OPTIONS) is answered without the API key, which a
// browser never sends there; the request that follows is authenticated as any other.
#pragma once
#include <string>
#include <vector>
#include "server/http_wire.h"

namespace flashserve {

class CorsPolicy {
 public:
  explicit CorsPolicy(std::vector<std::string> allowed_origins);
  bool enabled() const { return !allowed_.empty(); }
  bool allows(const std::string& origin) const;
  // The headers an answer to a request from `origin` carries; none when CORS is off, the request
  // has no Origin, or the origin is not allowed.
  HeaderList answer_headers(const std::string& origin) const;
  // What a preflight's answer adds for an allowed origin to answer_headers: the methods, the headers
  // the browser asked to send (`requested_headers`) and how long it may cache the answer.
  static HeaderList preflight_headers(const std::string& requested_headers);

 private:
  std::vector<std::string> allowed_;
  bool any_ = false;
};

}  // namespace flashserve
