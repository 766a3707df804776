#include "server/api_writer.h"

#include <random>

namespace flashserve {

RequestError server_abort_error(const RequestOutput& o) {
  return o.error.value_or(RequestError{ErrorKind::Internal, "the request was aborted by the server"});
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

std::string sse_event(const std::string& name, const json& j) { return "event: " + name + "\n" + sse_event(j); }

std::string random_id(const char* prefix) {
  static constexpr char kHex[] = "0123456789abcdef";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += kHex[rng() & 15];
  return id;
}

}  // namespace flashserve
