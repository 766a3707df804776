#include "server/cors.h"

#include <algorithm>

namespace flashserve {

CorsPolicy::CorsPolicy(std::vector<std::string> allowed_origins) : allowed_(std::move(allowed_origins)) {
  any_ = std::find(allowed_.begin(), allowed_.end(), "*") != allowed_.end();
}

bool CorsPolicy::allows(const std::string& origin) const {
  if (origin.empty() || !enabled()) return false;
  return any_ || std::find(allowed_.begin(), allowed_.end(), origin) != allowed_.end();
}

HeaderList CorsPolicy::answer_headers(const std::string& origin) const {
  if (!allows(origin)) return {};
  // The origin itself rather than "*", so an answer a cache keeps for one origin is not served to
  // another (Vary says so).
  return {{"Access-Control-Allow-Origin", origin}, {"Vary", "Origin"}};
}

HeaderList CorsPolicy::preflight_headers(const std::string& requested_headers) {
  return {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
          {"Access-Control-Allow-Headers", requested_headers.empty() ? "Authorization, Content-Type" : requested_headers},
          {"Access-Control-Max-Age", "600"}};
}

}  // namespace flashserve
