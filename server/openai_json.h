// The JSON vocabulary every OpenAI request parser shares (openai_protocol, openai_tools,
// openai_constraints): the json type, the 400 error and the field helpers. Kept below those files
// so that none of them includes another for these.
#pragma once
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <nlohmann/json.hpp>

namespace flashserve {

// Ordered: a JSON Schema's properties are generated in the order the client wrote them.
using json = nlohmann::ordered_json;

// An error for the client: HTTP status and OpenAI's error fields.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string type, std::string param = "", std::string code = "")
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string type, param, code;
  int retry_after_s = 0;  // > 0: sent as Retry-After (429, 503)
};

ApiError bad_request(const std::string& message, const std::string& param = "", const std::string& code = "");
// {"error": {"message", "type", "param", "code"}}, with nulls for empty param/code.
json error_body(const ApiError& e);

// A field's value; absent and null both mean "not given", as the OpenAI API treats them.
const json* field(const json& obj, const char* key);
// 400 (param `param`) naming the first key of `obj`, an object at `where`, not among `keys`.
void only_keys(const json& obj, const std::set<std::string_view>& keys, const std::string& where,
               const std::string& param);

// The body as a JSON object; malformed JSON or a non-object -> 400.
json parse_body(const std::string& body);

}  // namespace flashserve
