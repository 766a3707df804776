// JSON Schema to GBNF (grammar/json_schema.h). The grammar must never accept a document the schema
// rejects, and should accept valid documents written compactly, with ", " / ": " separators, or
// pretty-printed. Checked three ways:
//   - json_schema_cases.json: schemas with documents labelled valid or not (and, where a valid
//     document is knowingly outside what the grammar accepts, "accepted": false); the labels are
//     themselves checked by a small validator written here, so a wrong label cannot hide a bug;
//   - exhaustive sweeps of integer and number bounds;
//   - random walks through the grammar, every finished text parsed and validated.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace flashserve::grammar {
namespace {

using Json = nlohmann::ordered_json;

std::shared_ptr<const Grammar> compile(const Json& schema, bool strict = false) {
  return std::make_shared<const Grammar>(parse_gbnf(json_schema_to_gbnf(schema, {strict}), "root"));
}

bool matches(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  return m.advance(text) && m.can_end();
}

std::string error_of(const Json& schema, bool strict = false) {
  try {
    json_schema_to_gbnf(schema, {strict});
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

// The regex compiler is written separately; until it lands, `pattern` schemas cannot compile.
bool regex_missing(const std::string& error) { return error.find("not written yet") != std::string::npos; }

// {"a": 1, "b": [1, 2]}: the separators Python's json.dumps uses.
std::string spaced(const Json& v) {
  if (!v.is_object() && !v.is_array()) return v.dump();
  std::string out = v.is_object() ? "{" : "[";
  bool first = true;
  for (const auto& [k, item] : v.items()) {
    if (!first) out += ", ";
    if (v.is_object()) out += Json(k).dump() + ": ";
    out += spaced(item);
    first = false;
  }
  return out + (v.is_object() ? "}" : "]");
}

// ---- a validator for the keywords the tests use ----

size_t code_points(const std::string& s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

bool valid_date(const std::string& s) {
  static const std::regex re(R"(^(\d{4})-(\d{2})-(\d{2})$)");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  const int y = std::stoi(m[1]), mo = std::stoi(m[2]), d = std::stoi(m[3]);
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (mo < 1 || mo > 12 || d < 1) return false;
  return d <= days[mo - 1] + (mo == 2 && leap(y) ? 1 : 0);
}

bool valid_time(const std::string& s) {
  static const std::regex re(R"(^(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$)");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  if (std::stoi(m[1]) > 23 || std::stoi(m[2]) > 59 || std::stoi(m[3]) > 60) return false;
  return !m[6].matched || (std::stoi(m[6]) <= 23 && std::stoi(m[7]) <= 59);
}

bool valid_ipv4(const std::string& s) {
  static const std::regex re(R"(^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$)");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return false;
  for (int i = 1; i <= 4; ++i) {
    const std::string part = m[i];
    if ((part.size() > 1 && part[0] == '0') || std::stoi(part) > 255) return false;
  }
  return true;
}

bool valid_format(const std::string& format, const std::string& s) {
  if (format == "date") return valid_date(s);
  if (format == "time") return valid_time(s);
  if (format == "date-time") {
    const size_t t = s.find_first_of("Tt");
    return t != std::string::npos && valid_date(s.substr(0, t)) && valid_time(s.substr(t + 1));
  }
  if (format == "uuid") {
    static const std::regex re("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$");
    return std::regex_match(s, re);
  }
  if (format == "ipv4") return valid_ipv4(s);
  if (format == "email") return std::regex_match(s, std::regex(R"(^[^@\s]+@[^@\s]+$)"));
  ADD_FAILURE() << "validator lacks format " << format;
  return false;
}

// JSON Schema equality: numbers by value, objects regardless of key order.
bool same(const Json& a, const Json& b) { return nlohmann::json(a) == nlohmann::json(b); }

class Validator {
 public:
  Validator(const Json& root, bool strict) : root_(root), strict_(strict) {}
  bool valid(const Json& v) const { return valid(root_, v); }

  bool valid(const Json& s, const Json& v) const {
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref") && !valid(resolve(s["$ref"]), v)) return false;
    if (s.contains("type") && !type_ok(s["type"], v)) return false;
    if (s.contains("enum") && std::none_of(s["enum"].begin(), s["enum"].end(), [&](const Json& e) { return same(e, v); })) {
      return false;
    }
    if (s.contains("const") && !same(s["const"], v)) return false;
    for (const char* k : {"allOf", "anyOf", "oneOf"}) {
      if (!s.contains(k)) continue;
      const auto n = std::count_if(s[k].begin(), s[k].end(), [&](const Json& b) { return valid(b, v); });
      const bool ok = std::string(k) == "allOf" ? size_t(n) == s[k].size() : std::string(k) == "anyOf" ? n > 0 : n == 1;
      if (!ok) return false;
    }
    if (v.is_object()) return object_ok(s, v);
    if (v.is_array()) return array_ok(s, v);
    if (v.is_string()) return string_ok(s, v.get<std::string>());
    if (v.is_number()) return number_ok(s, v.get<double>());
    return true;
  }

 private:
  static bool type_ok(const Json& t, const Json& v) {
    if (t.is_array()) return std::any_of(t.begin(), t.end(), [&](const Json& one) { return type_ok(one, v); });
    const std::string n = t.get<std::string>();
    if (n == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    return (n == "null" && v.is_null()) || (n == "boolean" && v.is_boolean()) || (n == "object" && v.is_object()) ||
           (n == "array" && v.is_array()) || (n == "string" && v.is_string()) || (n == "number" && v.is_number());
  }

  const Json& resolve(const Json& ref) const {
    std::string pointer = ref.get<std::string>().substr(1);
    for (size_t p; (p = pointer.find("%20")) != std::string::npos;) pointer.replace(p, 3, " ");
    return root_.at(Json::json_pointer(pointer));
  }

  bool object_ok(const Json& s, const Json& v) const {
    if (s.contains("required")) {
      for (const Json& r : s["required"]) {
        if (!v.contains(r.get<std::string>())) return false;
      }
    }
    const Json extra = s.contains("additionalProperties") ? s["additionalProperties"] : Json(!strict_);
    for (const auto& [k, item] : v.items()) {
      const bool listed = s.contains("properties") && s["properties"].contains(k);
      if (!valid(listed ? s["properties"][k] : extra, item)) return false;
    }
    return true;
  }

  bool array_ok(const Json& s, const Json& v) const {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    const size_t prefix = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const Json& item_schema = i < prefix ? s["prefixItems"][i] : s.contains("items") ? s["items"] : Json(true);
      if (!valid(item_schema, v[i])) return false;
    }
    return true;
  }

  static bool string_ok(const Json& s, const std::string& v) {
    if (s.contains("minLength") && code_points(v) < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && code_points(v) > s["maxLength"].get<size_t>()) return false;
    if (s.contains("pattern") && !std::regex_search(v, std::regex(s["pattern"].get<std::string>()))) return false;
    return !s.contains("format") || valid_format(s["format"].get<std::string>(), v);
  }

  static bool number_ok(const Json& s, double v) {
    if (s.contains("minimum") && v < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && v > s["maximum"].get<double>()) return false;
    if (s.contains("exclusiveMinimum") && v <= s["exclusiveMinimum"].get<double>()) return false;
    return !s.contains("exclusiveMaximum") || v < s["exclusiveMaximum"].get<double>();
  }

  const Json& root_;
  bool strict_;
};

Json load_cases() {
  std::ifstream in(std::string(FLASHSERVE_SOURCE_DIR) + "/tests/grammar/json_schema_cases.json");
  EXPECT_TRUE(in.good());
  return Json::parse(in);
}

TEST(JsonSchema, Cases) {
  const Json groups = load_cases();
  ASSERT_GE(groups.size(), 40u);
  size_t checked = 0, skipped = 0;
  for (const Json& group : groups) {
    const std::string name = group["description"].get<std::string>();
    SCOPED_TRACE(name);
    const bool strict = group.value("strict", false);
    std::shared_ptr<const Grammar> g;
    try {
      g = compile(group["schema"], strict);
    } catch (const GrammarError& e) {
      if (regex_missing(e.what())) {
        ++skipped;
        continue;
      }
      ADD_FAILURE() << e.what();
      continue;
    }
    const Validator validator(group["schema"], strict);
    for (const Json& test : group["tests"]) {
      SCOPED_TRACE(test["description"].get<std::string>());
      const Json& data = test["data"];
      const bool valid = test["valid"].get<bool>();
      const bool accepted = test.value("accepted", valid);
      ASSERT_FALSE(accepted && !valid) << "a case may not expect an invalid document to be accepted";
      EXPECT_EQ(validator.valid(data), valid) << "label disagrees with the reference validator: " << data.dump();
      for (const std::string& text : {data.dump(), data.dump(2), spaced(data)}) {
        EXPECT_EQ(matches(g, text), accepted) << text;
        ++checked;
      }
    }
  }
  std::printf("[   INFO   ] %zu documents checked, %zu schema groups skipped (regex not available)\n", checked, skipped);
}

std::string bounds_text(const Json& s) { return s.dump(); }

// Every integer in a window around the bounds, and the bounds' neighbours: accepted exactly when
// in range, and only in canonical form.
TEST(JsonSchema, IntegerRangesAreExact) {
  const Json configs = Json::parse(R"([
    {"minimum": 0, "maximum": 120}, {"minimum": -5}, {"maximum": 1000000},
    {"exclusiveMinimum": -10, "exclusiveMaximum": 10}, {"minimum": -1234, "maximum": -17},
    {"minimum": 99, "maximum": 1001}, {"minimum": 1.5, "maximum": 7.2}, {"exclusiveMinimum": 2.5, "exclusiveMaximum": 9.0},
    {"minimum": 0, "exclusiveMaximum": 1}, {"minimum": -1e300, "maximum": 3}, {"minimum": 5, "maximum": 5},
    {"minimum": 100, "maximum": 999}, {"minimum": -999, "maximum": -100}, {"minimum": 1, "maximum": 9999999}
  ])");
  for (Json s : configs) {
    SCOPED_TRACE(bounds_text(s));
    s["type"] = "integer";
    const auto g = compile(s);
    const Validator validator(s, false);
    for (int64_t n = -1500; n <= 1500; ++n) {
      ASSERT_EQ(matches(g, std::to_string(n)), validator.valid(Json(n))) << n;
    }
    for (int64_t n : {int64_t(9999998), int64_t(9999999), int64_t(10000000), int64_t(-1000000), int64_t(1000001)}) {
      ASSERT_EQ(matches(g, std::to_string(n)), validator.valid(Json(n))) << n;
    }
    for (const char* odd : {"-0", "00", "01", "+1", "1.0", "1e2", "-"}) EXPECT_FALSE(matches(g, odd)) << odd;
  }
}

TEST(JsonSchema, IntegerBoundsNearTheDigitCap) {
  const auto g = compile(Json::parse(R"({"type": "integer", "minimum": 999999999999999990})"));
  EXPECT_TRUE(matches(g, "999999999999999990"));
  EXPECT_TRUE(matches(g, "999999999999999999"));
  EXPECT_FALSE(matches(g, "999999999999999989"));
  EXPECT_FALSE(matches(g, "1000000000000000000"));  // 19 digits: past the cap, refused
  EXPECT_EQ(error_of(Json::parse(R"({"type": "integer", "minimum": 1e19})")),
            "json schema: no integer satisfies the bounds at the root");
}

// Numbers with bounds: sound on a grid of decimals, and complete on integers and on fractions
// whose integer part's whole unit interval is in range.
TEST(JsonSchema, NumberBoundsAreSound) {
  const Json configs = Json::parse(R"([
    {"minimum": 0, "maximum": 1}, {"exclusiveMinimum": 0}, {"minimum": -2.5, "maximum": -1},
    {"minimum": -1.5, "maximum": 2.5}, {"exclusiveMinimum": -3, "exclusiveMaximum": 3}, {"maximum": 0},
    {"exclusiveMaximum": 0}, {"minimum": 0.25, "exclusiveMaximum": 12}
  ])");
  for (Json s : configs) {
    SCOPED_TRACE(bounds_text(s));
    s["type"] = "number";
    const auto g = compile(s);
    const Validator validator(s, false);
    for (int whole = -15; whole <= 15; ++whole) {
      for (const char* frac : {"", ".0", ".05", ".5", ".99"}) {
        for (const char* sign : {"", "-"}) {
          if (whole < 0 && *sign) continue;
          const std::string text = sign + std::to_string(whole) + frac;
          const double v = std::stod(text);
          const bool ok = matches(g, text);
          if (ok) {
            EXPECT_TRUE(validator.valid(Json(v))) << text;
          }
          const bool integer = !*frac;
          // The unit interval a fraction's integer part stands for: [I, I+1) or (-(I+1), -I].
          const bool negative = text[0] == '-';
          const double lo = std::floor(std::abs(v)) * (negative ? -1 : 1);
          const bool unit_inside = validator.valid(Json(lo)) && validator.valid(Json(lo + (negative ? -0.9999999 : 0.9999999)));
          if ((integer && !*sign && validator.valid(Json(v))) || (!integer && unit_inside)) {
            EXPECT_TRUE(ok) << text;
          }
        }
      }
    }
  }
}

TEST(JsonSchema, OptionalPropertiesAnySubsetInOrder) {
  Json schema = Json::parse(R"({"type": "object", "additionalProperties": false,
                                "properties": {"a": {}, "b": {}, "c": {}, "d": {}, "e": {}, "f": {}},
                                "required": ["b", "e"]})");
  const auto g = compile(schema);
  const std::string names = "abcdef";
  for (int mask = 0; mask < 64; ++mask) {
    Json doc = Json::object();
    for (int i = 0; i < 6; ++i) {
      if (mask & (1 << i)) doc[std::string(1, names[size_t(i)])] = i;
    }
    const bool valid = (mask & 2) && (mask & 16);
    EXPECT_EQ(matches(g, doc.dump()), valid) << doc.dump();
  }
  // Linear size: 200 optional properties compile quickly into a small grammar.
  Json wide = Json::parse(R"({"type": "object", "properties": {}})");
  for (int i = 0; i < 200; ++i) wide["properties"]["p" + std::to_string(i)] = Json::parse(R"({"type": "integer"})");
  EXPECT_LT(json_schema_to_gbnf(wide).size(), 64u * 1024);
}

TEST(JsonSchema, PropertyOrderFollowsTheSchema) {
  const std::string text = R"({"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}},
                               "required": ["zeta", "alpha"], "additionalProperties": false})";
  const auto ordered = compile(Json::parse(text));
  EXPECT_TRUE(matches(ordered, R"({"zeta":1,"alpha":2})"));
  EXPECT_FALSE(matches(ordered, R"({"alpha":2,"zeta":1})"));
  // nlohmann::json keeps keys sorted, so that overload can only offer alphabetical order.
  const auto sorted = std::make_shared<const Grammar>(parse_gbnf(json_schema_to_gbnf(nlohmann::json::parse(text))));
  EXPECT_TRUE(matches(sorted, R"({"alpha":2,"zeta":1})"));
}

// Extra properties come after the listed ones under other names: a listed name written again,
// or spelled with escapes, would let its value escape its schema (the last duplicate wins).
TEST(JsonSchema, ExtraKeysNeverSpellListedNames) {
  const auto g = compile(Json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}, "bc": {"type": "null"}}})"));
  for (const char* ok : {R"({"a":1,"b":"x"})", R"({"bc":null,"bcd":1,"":2,"aé":3})", R"({"ab":"x","c":[]})"}) {
    EXPECT_TRUE(matches(g, ok)) << ok;
  }
  for (const char* bad : {R"({"a":"x"})", R"({"b":1,"a":"x"})", R"({"a":1,"a":"x"})", R"({"\u0061":"x"})",
                          R"({"bc":null,"bc":1})", R"({"x":1,"bc":1})"}) {
    EXPECT_FALSE(matches(g, bad)) << bad;
  }
}

TEST(JsonSchema, StringCharactersAndEscapes) {
  const auto g = compile(Json::parse(R"({"type": "string", "maxLength": 1})"));
  EXPECT_TRUE(matches(g, R"("\ud83d\ude00")"));  // a surrogate pair is one character
  EXPECT_TRUE(matches(g, R"("\u00e9")"));
  EXPECT_FALSE(matches(g, R"("\ud83d")"));  // a lone surrogate is no character
  EXPECT_FALSE(matches(g, R"("\ude00")"));
  EXPECT_FALSE(matches(g, R"("\x")"));
  EXPECT_FALSE(matches(g, "\"\n\""));  // raw control character
  EXPECT_FALSE(matches(g, "\"\x7f\""));
  const auto two = compile(Json::parse(R"({"type": "string", "minLength": 2})"));
  EXPECT_FALSE(matches(two, R"("\ud83d\ude00")"));
  EXPECT_TRUE(matches(two, R"("\ud83d\ude00\/")"));
}

TEST(JsonSchema, WhitespaceIsBounded) {
  const auto g = compile(Json::parse(R"({"type": "array", "items": {"type": "integer"}})"));
  EXPECT_TRUE(matches(g, "[\n" + std::string(20, ' ') + "1\n]"));
  EXPECT_TRUE(matches(g, "[\n\t\t1,\n  2\n]"));
  EXPECT_FALSE(matches(g, "[\n" + std::string(21, ' ') + "1\n]"));
  EXPECT_FALSE(matches(g, "[  1]"));    // one space, or a newline and indentation
  EXPECT_FALSE(matches(g, " [1]"));     // nothing before the value
  EXPECT_FALSE(matches(g, "[1]\n"));    // or after it
  EXPECT_FALSE(matches(g, "[1 ,\n\n2]"));
}

TEST(JsonSchema, AnyJsonObject) {
  const auto g = std::make_shared<const Grammar>(parse_gbnf(any_json_object_gbnf()));
  for (const char* ok : {"{}", R"({"a": [1, {"b": null}], "c": "d\n\u0041"})", "{\n  \"x\": {\n    \"y\": -1.5e3\n  }\n}"}) {
    EXPECT_TRUE(matches(g, ok)) << ok;
  }
  for (const char* bad : {"[]", "1", R"("x")", R"({"a"})", R"({"a":1,})", "{'a': 1}", R"({"a":01})"}) {
    EXPECT_FALSE(matches(g, bad)) << bad;
  }
}

TEST(JsonSchema, PatternStringsAreJsonEscaped) {
  const Json schema = Json::parse(R"({"type": "string", "pattern": "^[^a]$"})");
  const std::string error = error_of(schema);
  if (regex_missing(error)) GTEST_SKIP() << "regex_to_gbnf is not written yet";
  ASSERT_EQ(error, "");
  const auto g = compile(schema);
  for (const char* ok : {R"("b")", R"("\"")", R"("\\")", R"("\n")", R"("\u0001")", R"("\u001F")", R"("é")"}) {
    EXPECT_TRUE(matches(g, ok)) << ok;
  }
  for (const char* bad : {R"("a")", R"(""")", "\"\n\"", R"("\")", R"("bb")", R"("")"}) EXPECT_FALSE(matches(g, bad)) << bad;
}

// ---- random walks ----

// Bytes a walk may try: JSON punctuation, digits, letters of literals, escapes and formats, and the
// bytes of multi-byte characters.
const std::string kAlphabet =
    "{}[]:,\" \n\t\\-+.0123456789abcdefghijklmnopqrstuvwxyzABCDEFTZ@/_!\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";

// A random sentence of the grammar, or "" when the walk did not finish within its budget.
std::string random_walk(const Grammar& g, std::mt19937& rng) {
  StackPool pool;
  Stepper stepper(g, pool);
  MatchState state = stepper.initial(), next;
  std::string text, order = kAlphabet;
  constexpr size_t kSoft = 120, kHard = 3000;
  while (text.size() < kHard) {
    if (Stepper::can_end(state) && (rng() % 4 == 0 || text.size() > kSoft)) return text;
    std::shuffle(order.begin(), order.end(), rng);
    // Past the soft limit, often prefer closing what is open (not always: '}' can be string content).
    if (text.size() > kSoft && rng() % 2 == 0) {
      std::stable_partition(order.begin(), order.end(), [](char c) { return c == '"' || c == '}' || c == ']'; });
    }
    bool stepped = false;
    for (char c : order) {
      if (stepper.step(state, static_cast<uint8_t>(c), next)) {
        std::swap(state, next);
        text += c;
        stepped = true;
        break;
      }
    }
    if (!stepped) return Stepper::can_end(state) ? text : "";
  }
  return "";
}

TEST(JsonSchema, RandomWalksProduceValidDocuments) {
  const Json schemas = Json::parse(R"([
    {"type": "object", "properties": {
       "name": {"type": "string", "maxLength": 6}, "age": {"type": "integer", "minimum": 0, "maximum": 120},
       "email": {"type": "string", "format": "email"},
       "tags": {"type": "array", "items": {"enum": ["a", "b", 3, null]}, "maxItems": 3}},
     "required": ["name", "age"], "additionalProperties": false},
    {"$defs": {"node": {"type": "object", "properties": {
       "value": {"type": "integer", "minimum": -5, "maximum": 5},
       "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
       "required": ["value"], "additionalProperties": false}},
     "$ref": "#/$defs/node"},
    {"anyOf": [{"type": "string", "minLength": 2, "maxLength": 4},
               {"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 30},
               {"type": "null"},
               {"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]}]},
    {"type": "array", "items": {"type": "number", "minimum": -2.5, "maximum": 3}, "maxItems": 4},
    {"type": "array", "prefixItems": [{"type": "string", "format": "date"}, {"type": "string", "format": "time"},
                                      {"type": "string", "format": "uuid"}],
     "items": {"type": "boolean"}, "minItems": 2, "maxItems": 5},
    {"type": "object", "properties": {"x": {"type": "string", "format": "ipv4"}, "y": {"type": "boolean"}},
     "required": ["x"], "additionalProperties": {"type": "integer"}},
    {"enum": [1, "one", null, [1, {"a": []}], {"k": "v", "l": [true]}, 2.5]},
    {"type": "string", "minLength": 1, "maxLength": 3},
    {"type": "string", "format": "date-time"},
    {"allOf": [{"type": "object", "properties": {"a": {"type": "string", "maxLength": 2}}, "required": ["a"]},
               {"properties": {"a": true, "b": {"type": "integer"}}, "additionalProperties": false}]},
    {"type": "object", "properties": {"ab": {"type": "integer"}, "b": {"type": "null"}}},
    {"type": ["integer", "array"], "items": {"type": ["string", "null"]}, "minimum": 7, "maxItems": 2},
    {"type": "array", "items": {"type": "string", "pattern": "^(a|[\"\\\\\\n]b)+x?$"}}
  ])");
  std::mt19937 rng(1234);
  for (const Json& schema : schemas) {
    SCOPED_TRACE(schema.dump());
    if (regex_missing(error_of(schema))) continue;
    const auto g = compile(schema);
    const Validator validator(schema, false);
    int finished = 0;
    for (int walk = 0; walk < 400; ++walk) {
      const std::string text = random_walk(*g, rng);
      if (text.empty()) continue;
      ++finished;
      Json doc;
      try {
        doc = Json::parse(text);
      } catch (const nlohmann::json::exception& e) {
        ADD_FAILURE() << "not JSON: " << text << " (" << e.what() << ")";
        continue;
      }
      EXPECT_TRUE(validator.valid(doc)) << text;
    }
    EXPECT_GE(finished, 200);
  }
}

TEST(JsonSchema, RandomWalksOverEveryCaseSchema) {
  std::mt19937 rng(42);
  size_t finished = 0;
  for (const Json& group : load_cases()) {
    SCOPED_TRACE(group["description"].get<std::string>());
    const bool strict = group.value("strict", false);
    if (regex_missing(error_of(group["schema"], strict))) continue;
    const auto g = compile(group["schema"], strict);
    const Validator validator(group["schema"], strict);
    for (int walk = 0; walk < 60; ++walk) {
      const std::string text = random_walk(*g, rng);
      if (text.empty()) continue;
      ++finished;
      const Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(doc.is_discarded()) << "not JSON: " << text;
      if (!doc.is_discarded()) {
        EXPECT_TRUE(validator.valid(doc)) << text;
      }
    }
  }
  EXPECT_GT(finished, 2000u);
}

// ---- errors ----

TEST(JsonSchema, RefusesWhatItCannotEnforce) {
  auto err = [](const char* schema) { return error_of(Json::parse(schema)); };
  EXPECT_EQ(err(R"({"type": "string", "not": {"const": "a"}})"), "json schema: unsupported keyword 'not' at the root");
  EXPECT_EQ(err(R"({"properties": {"a": {"type": "array", "uniqueItems": true}}})"),
            "json schema: unsupported keyword 'uniqueItems' at /properties/a");
  EXPECT_EQ(err(R"({"properties": {"a/b~c": {"nullable": true}}})"),
            "json schema: unsupported keyword 'nullable' at /properties/a~1b~0c");
  EXPECT_EQ(err(R"({"type": "array", "items": {"anyOf": [{"type": "integer", "multipleOf": 2}]}})"),
            "json schema: unsupported keyword 'multipleOf' at /items/anyOf/0");
  for (const char* k : {"if", "patternProperties", "propertyNames", "dependentRequired", "minProperties",
                        "maxProperties", "contains", "unevaluatedProperties", "x-custom"}) {
    EXPECT_EQ(error_of(Json{{"type", "object"}, {k, Json::object()}}),
              std::string("json schema: unsupported keyword '") + k + "' at the root");
  }
  EXPECT_EQ(err(R"({"type": "string", "format": "hostname"})"), "json schema: unsupported format 'hostname' at the root");
  EXPECT_EQ(err(R"({"enum": [1, 2], "minimum": 0})"),
            "json schema: 'minimum' next to 'enum' or 'const' is not supported at the root");
  EXPECT_EQ(err(R"({"type": "string", "pattern": "a", "maxLength": 3})"),
            "json schema: 'pattern', 'format' and 'minLength'/'maxLength' cannot be combined at the root");
  EXPECT_EQ(err(R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})"),
            "json schema: 'pattern' in more than one allOf branch is not supported at the root");
  EXPECT_EQ(err(R"({"anyOf": [{}], "oneOf": [{}]})"), "json schema: 'anyOf' and 'oneOf' together are not supported at the root");
  EXPECT_EQ(err(R"({"$defs": {"a": {"$id": "urn:a", "type": "null"}}, "$ref": "#/$defs/a"})"),
            "json schema: '$id' below the root is not supported at /$defs/a");
}

// A grammar cannot count matching branches: oneOf is enforced only where branches exclude each other.
TEST(JsonSchema, OneOfOnlyWithExclusiveBranches) {
  auto err = [](const char* schema) { return error_of(Json::parse(schema)); };
  for (const char* exclusive : {
           R"({"oneOf": [{"type": "string"}, {"type": ["integer", "null"]}]})",
           R"({"oneOf": [{"const": "a"}, {"enum": ["b", 1]}, {"type": "boolean"}]})",
           R"({"oneOf": [{"type": "integer"}, {"enum": ["1", true]}]})",
           // Pydantic's discriminated union: $refs to objects that require a property of distinct consts.
           R"({"$defs": {"Cat": {"type": "object", "properties": {"pet": {"const": "cat"}, "meows": {"type": "boolean"}},
               "required": ["pet", "meows"]}, "Dog": {"type": "object", "properties": {"pet": {"enum": ["dog"]},
               "barks": {"type": "boolean"}}, "required": ["pet"]}},
               "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
               "discriminator": {"propertyName": "pet", "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}}})",
           // A sibling keyword that rules a branch out leaves nothing to overlap.
           R"({"type": "string", "oneOf": [{"type": "string"}, {"type": "integer"}]})",
       }) {
    EXPECT_EQ(err(exclusive), "") << exclusive;
  }
  EXPECT_EQ(err(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})"),
            "json schema: 'oneOf' branches 0 and 1 may both match, which a grammar cannot rule out; make them differ in "
            "'type', 'const'/'enum' values or a required property's 'const', or use 'anyOf' at the root");
  EXPECT_NE(err(R"({"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "minLength": 5}]})"), "");
  EXPECT_NE(err(R"({"oneOf": [{"enum": ["a", "b"]}, {"enum": ["b", "c"]}]})"), "");
  // `properties` alone does not make a schema refuse strings.
  EXPECT_NE(err(R"({"oneOf": [{"type": "string"}, {"properties": {"a": {"type": "null"}}}]})"), "");
  // The discriminator must be required by both branches.
  EXPECT_NE(err(R"({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                              {"type": "object", "properties": {"k": {"const": 2}}}]})"),
            "");
  EXPECT_TRUE(err(R"({"properties": {"x": {"oneOf": [{"type": "integer"}, {"minimum": 0}]}}})")
                  .ends_with("or use 'anyOf' at /properties/x"));
}

TEST(JsonSchema, RefusesBadValues) {
  auto err = [](const char* schema) { return error_of(Json::parse(schema)); };
  EXPECT_EQ(err(R"({"type": "strin"})"),
            "json schema: 'type' must be one of null, boolean, object, array, number, integer, string or a list of them "
            "at the root");
  EXPECT_EQ(err(R"({"type": "string", "minLength": 4, "maxLength": 3})"),
            "json schema: 'maxLength' is less than 'minLength' at the root");
  EXPECT_EQ(err(R"({"type": "array", "minItems": -1})"), "json schema: 'minItems' must be a non-negative integer at the root");
  EXPECT_EQ(err(R"({"type": "object", "required": "a"})"), "json schema: 'required' must be a list of strings at the root");
  EXPECT_EQ(err(R"({"type": "object", "properties": {"a": {}}, "required": ["b"], "additionalProperties": false})"),
            "json schema: required property 'b' is not in 'properties' and additionalProperties is false at the root");
  EXPECT_EQ(err(R"({"type": "array", "items": [{"type": "string"}]})"),
            "json schema: 'items' as a list is not supported (use 'prefixItems') at the root");
  EXPECT_EQ(err(R"({"properties": {"a": 3}})"), "json schema: 'properties' values must be schemas at /properties/a");
  EXPECT_EQ(err(R"({"type": "integer", "minimum": 5, "maximum": 4})"), "json schema: no integer satisfies the bounds at the root");
  EXPECT_EQ(err(R"({"type": "number", "exclusiveMinimum": true})"), "json schema: 'exclusiveMinimum' must be a number at the root");
  EXPECT_EQ(err(R"({"type": "integer", "enum": ["a"]})"),
            "json schema: no value satisfies 'enum', 'const' and 'type' together at the root");
  EXPECT_EQ(err("false"), "json schema: schema false matches nothing at the root");
  EXPECT_EQ(err(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})"), "json schema: allOf matches nothing at the root");
  EXPECT_EQ(err("[1]"), "json schema: expected a schema (an object or a boolean) at the root");
  EXPECT_EQ(error_of(Json::parse(R"({"type": "object"})"), true).size(), 0u);
}

TEST(JsonSchema, RefusesBadRefs) {
  auto err = [](const char* schema) { return error_of(Json::parse(schema)); };
  EXPECT_EQ(err(R"({"properties": {"a": {"$ref": "#/$defs/missing"}}})"),
            "json schema: $ref '#/$defs/missing' does not resolve at /properties/a");
  EXPECT_EQ(err(R"({"$ref": "https://example.com/schema"})"),
            "json schema: $ref 'https://example.com/schema' is not local (only '#...' refs are supported) at the root");
  EXPECT_EQ(err(R"({"$ref": "#node"})"), "json schema: $ref '#node' is not a JSON pointer at the root");
  EXPECT_EQ(err(R"({"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"})"),
            "json schema: $ref '#/$defs/A' recurses without consuming input at /$defs/B");
  EXPECT_EQ(err(R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})"),
            "json schema: $ref '#' recurses without consuming input at /anyOf/0");
  EXPECT_EQ(err(R"({"$defs": {"A": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/B"}}, {"$ref": "#/$defs/B"}]},
                               "B": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"})"),
            "json schema: $ref '#/$defs/B' recurses without consuming input at /$defs/A/anyOf/1");
  EXPECT_EQ(err(R"({"$defs": {"A": {"allOf": [{"$ref": "#/$defs/A"}]}}, "$ref": "#/$defs/A"})"),
            "json schema: $ref '#/$defs/A' recurses without consuming input at /$defs/A/allOf/0");
  // Recursion through a bracket is fine.
  EXPECT_EQ(err(R"({"anyOf": [{"type": "array", "items": {"$ref": "#"}}, {"type": "null"}]})"), "");
}

TEST(JsonSchema, HostileSchemasStayBounded) {
  Json deep = Json::parse(R"({"type": "integer"})");
  std::string path;
  for (int i = 0; i < 70; ++i) {
    deep = Json{{"type", "array"}, {"items", deep}};
    if (i < 64) path += "/items";
  }
  EXPECT_EQ(error_of(deep), "json schema: nested deeper than 64 at " + path + "/items");
  EXPECT_EQ(error_of(Json::parse(R"({"type": "string", "maxLength": 5000})")),
            "json schema: 'maxLength' 5000 is over the supported maximum of 1000 at the root");
  EXPECT_EQ(error_of(Json::parse(R"({"properties": {"a": {"type": "array", "minItems": 1001}}})")),
            "json schema: 'minItems' 1001 is over the supported maximum of 1000 at /properties/a");
  Json many = Json::parse(R"({"type": "object", "properties": {}})");
  for (int i = 0; i < 60; ++i) {
    many["properties"]["s" + std::to_string(i)] = Json{{"type", "string"}, {"minLength", i}, {"maxLength", 1000}};
  }
  EXPECT_EQ(error_of(many), "json schema: length and item bounds add up to over 40000 repetitions at /properties/s40");
  Json same = many;
  for (auto& [k, v] : same["properties"].items()) v["minLength"] = 0;
  EXPECT_EQ(error_of(same), "");  // identical bounds share one rule
  std::string doubling = R"({"type": "object"})";
  for (int i = 0; i < 12; ++i) doubling = R"({"properties": {"a": {}}, "anyOf": [)" + doubling + ", " + doubling + "]}";
  EXPECT_EQ(error_of(Json::parse(doubling)).rfind("json schema: schema too complex: over 200000 steps to compile at /anyOf/", 0), 0u);
  // $refs that fan out to the same definitions: d_i is all of d_(i+1) twice, thirty levels deep.
  // Each definition is inlined once (all of A and A is A), so this costs 30 steps, not 2^30.
  Json fan = Json::parse(R"({"$ref": "#/$defs/d0", "$defs": {}})");
  for (int i = 0; i < 30; ++i) {
    const std::string next = "#/$defs/d" + std::to_string(i + 1);
    fan["$defs"]["d" + std::to_string(i)] = Json{{"allOf", {{{"$ref", next}}, {{"$ref", next}}}}};
  }
  fan["$defs"]["d30"] = Json::parse(R"({"type": "string", "maxLength": 3})");
  EXPECT_EQ(error_of(fan), "");
  Json huge = Json{{"enum", Json::array()}};
  for (int i = 0; i < 60000; ++i) huge["enum"].push_back("value number " + std::to_string(i));
  EXPECT_EQ(error_of(huge), "json schema: the grammar would be over 1 MiB");

  // A large accepted schema compiles, and parses, well under a second.
  Json big = Json::parse(R"({"type": "object", "properties": {}, "$defs": {}})");
  for (int i = 0; i < 300; ++i) {
    const std::string n = std::to_string(i);
    big["$defs"]["d" + n] = Json::parse(R"({"type": "object", "properties": {"x": {"type": "integer", "minimum": -)" + n +
                                        R"(, "maximum": )" + n + R"(}, "next": {"$ref": "#/$defs/d0"}}})");
    big["properties"]["property_with_a_long_name_" + n] = Json{{"$ref", "#/$defs/d" + n}};
  }
  const auto start = std::chrono::steady_clock::now();
  const auto g = compile(big);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 0.5);
  EXPECT_TRUE(matches(g, R"({"property_with_a_long_name_7": {"x": -7, "next": {"x": 0}}})"));
  EXPECT_FALSE(matches(g, R"({"property_with_a_long_name_7": {"x": 8}})"));
}

}  // namespace
}  // namespace flashserve::grammar
