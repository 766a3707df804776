// Values as text, the way Python writes them: str() (what {{ }} prints), repr() (inside a printed
// list or dict), and json.dumps (Hugging Face's tojson filter); plus the Unicode-aware string
// helpers Python's str methods need (strings are UTF-8; invalid bytes count as one character).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/jinja/value.h"

namespace flashserve::jinja {

// Python's str(v): "" for undefined, "None"/"True", repr() of floats and of container items.
void append_str(std::string& out, const Value& v, Budget& budget);
std::string to_str(const Value& v, Budget& budget);
// Python's repr(v) ('quoted' strings).
void append_repr(std::string& out, const Value& v, Budget& budget);
// Python's repr(float): shortest round-trip digits, "1.0", "1e+16", "inf".
std::string float_repr(double d);

struct JsonOptions {
  bool pretty = false;        // indent given: newlines and `indent` per level
  std::string indent;         // used when pretty
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool ensure_ascii = false;
  bool sort_keys = false;
};
// Python's json.dumps(v, ...); throws for values JSON cannot hold (undefined, namespace, ...).
void append_json(std::string& out, const Value& v, const JsonOptions& options, Budget& budget);

namespace text {

// The characters of s (code points; an invalid byte stands alone).
std::vector<std::string_view> chars(std::string_view s);
size_t char_count(std::string_view s);
// The code point of a character from chars() (the byte itself for an invalid one).
uint32_t code_point(std::string_view ch);
// Python's str.isspace() for one character.
bool is_space(std::string_view ch);
// str.strip/lstrip/rstrip: whitespace when chars is null, else any character of *chars.
std::string strip(std::string_view s, bool left, bool right, const std::string* chars = nullptr);
// str.upper/lower/title/capitalize, with Python's case mappings for Latin, Greek and Cyrillic
// letters (other scripts are kept as they are; no final-sigma rule).
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);
std::string capitalize(std::string_view s);
// Whether a character has case (a letter of the scripts above).
bool is_cased(std::string_view ch);
// str.splitlines() (without keepends).
std::vector<std::string> splitlines(std::string_view s);

}  // namespace text
}  // namespace flashserve::jinja
