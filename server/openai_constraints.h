// How an OpenAI request constrains its output: response_format (json_object, json_schema) and
// our extensions `grammar` (GBNF) and `regex`, on /v1/chat/completions and /v1/completions.
#pragma once
#include <optional>
#include <string>
#include <nlohmann/json.hpp>

namespace flashserve {

struct RequestedGrammar {
  std::string gbnf;   // root rule "root"
  std::string field;  // the request field it came from, for errors
};

// The grammar the request asks its output to follow; nullopt for free text. A malformed field, or
// a schema, regex or grammar that cannot be translated, is a 400 naming the field.
std::optional<RequestedGrammar> requested_grammar(const nlohmann::ordered_json& body);

}  // namespace flashserve
