#include "server/openai_json.h"

#include "model/bounded_json.h"

namespace flashserve {

const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

void only_keys(const json& obj, const std::set<std::string_view>& keys, const std::string& where,
               const std::string& param) {
  for (const auto& [key, value] : obj.items()) {
    if (!keys.count(key)) throw bad_request("'" + where + "." + key + "' is not a known field", param);
  }
}

ApiError bad_request(const std::string& message, const std::string& param, const std::string& code) {
  return ApiError(400, message, "invalid_request_error", param, code);
}

json error_body(const ApiError& e) {
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return {{"error", {{"message", e.what()}, {"type", e.type}, {"param", or_null(e.param)}, {"code", or_null(e.code)}}}};
}

json parse_body(const std::string& body) {
  json j;
  try {
    j = parse_bounded_json<json>(body);
  } catch (const JsonOverLimit& e) {
    throw bad_request(std::string("the request body is ") + e.what());
  }
  if (j.is_discarded()) throw bad_request("the request body is not valid JSON");
  if (!j.is_object()) throw bad_request("the request body must be a JSON object");
  return j;
}

}  // namespace flashserve
