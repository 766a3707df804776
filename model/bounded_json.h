// JSON text from outside (request bodies, schemas, a model's tool calls) parsed with limits that
// are checked while parsing, before the tree gets there:
// - nesting: nlohmann's tree copy and comparison recurse, and a body nested 100k deep overflowed
//   the stack; past kMaxJsonDepth the parse stops, so nothing downstream recurses deeper;
// - keys: ordered_json finds a key's place by a linear search through its object, so an object of
//   n keys costs n^2 / 2 string compares (50k keys: seconds). Objects hold at most
//   kMaxJsonObjectKeys, a document kMaxJsonKeys, so a body's keys cost at most ~3e7 compares.
#pragma once
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include <nlohmann/json.hpp>

namespace flashserve {

// Arrays and objects inside one another, the outermost counting 1. OpenAI's own structured-output
// schemas stop at 10 levels of objects (about 20 of JSON); 128 leaves room for any real request.
constexpr int kMaxJsonDepth = 128;
constexpr size_t kMaxJsonObjectKeys = 1024;  // logit_bias's largest (server/openai_protocol.cpp)
constexpr size_t kMaxJsonKeys = 65536;

class JsonOverLimit : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Discarded (is_discarded()) when `text` is not JSON; throws JsonOverLimit past a limit above.
template <class Json>
Json parse_bounded_json(std::string_view text) {
  std::vector<size_t> keys_per_object;  // of the objects open now, innermost last
  size_t keys = 0;
  auto limit = [&](int depth, typename Json::parse_event_t event, Json&) {
    using Event = typename Json::parse_event_t;
    if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth) {
      throw JsonOverLimit("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    if (event == Event::object_start) keys_per_object.push_back(0);
    if (event == Event::object_end) keys_per_object.pop_back();
    if (event == Event::key && (++keys_per_object.back() > kMaxJsonObjectKeys || ++keys > kMaxJsonKeys)) {
      throw JsonOverLimit("JSON with an object of over " + std::to_string(kMaxJsonObjectKeys) + " keys, or over " +
                          std::to_string(kMaxJsonKeys) + " keys in all");
    }
    return true;
  };
  return Json::parse(text, limit, /*allow_exceptions=*/false);
}

// Either the parsed value, or discarded for text that is not JSON or passes a limit (for callers
// to whom both mean "not what we expected").
template <class Json>
Json parse_bounded_json_or_discarded(std::string_view text) {
  try {
    return parse_bounded_json<Json>(text);
  } catch (const JsonOverLimit&) {
    return Json(Json::value_t::discarded);
  }
}

}  // namespace flashserve
