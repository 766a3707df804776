// JSON text from outside (request bodies, schemas, a model's tool calls) parsed with a nesting
// limit that is checked while parsing: nlohmann's tree copy and comparison recurse, and a body
// nested 100k deep overflows the stack. Past the limit the parse stops at once, before the tree
// goes any deeper, so nothing downstream ever recurses deeper than kMaxJsonDepth.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>
#include <nlohmann/json.hpp>

namespace flashserve {

// Arrays and objects inside one another, the outermost counting 1. OpenAI's own structured-output
// schemas stop at 10 levels of objects (about 20 of JSON); 128 leaves room for any real request.
constexpr int kMaxJsonDepth = 128;

class JsonTooDeep : public std::runtime_error {
 public:
  JsonTooDeep() : std::runtime_error("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels") {}
};

// Discarded (is_discarded()) when `text` is not JSON; throws JsonTooDeep past kMaxJsonDepth.
template <class Json>
Json parse_bounded_json(std::string_view text) {
  auto limit = [](int depth, typename Json::parse_event_t event, Json&) {
    const bool opens = event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start;
    if (opens && depth >= kMaxJsonDepth) throw JsonTooDeep();
    return true;
  };
  return Json::parse(text, limit, /*allow_exceptions=*/false);
}

// Either the parsed value, or discarded for text that is not JSON or nests too deep (for callers
// to whom both mean "not what we expected").
template <class Json>
Json parse_bounded_json_or_discarded(std::string_view text) {
  try {
    return parse_bounded_json<Json>(text);
  } catch (const JsonTooDeep&) {
    return Json(Json::value_t::discarded);
  }
}

}  // namespace flashserve
