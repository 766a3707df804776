// The JSON Schema compiler's parts (json_schema.h), shared by its source files:
//   json_schema.cpp           the compiler: schemas to rules, objects, arrays, enums, $ref, anyOf
//   json_schema_keywords.cpp  which keywords are accepted and their value shapes, $ref lookup, allOf
//   json_schema_numbers.cpp   integer and number bounds as digit-range rules
//   json_schema_strings.cpp   GBNF text: escaping, rule names, the fixed rules (JSON values,
//                             formats), pattern grammars over JSON-escaped text, object keys that
//                             avoid listed names
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace flashserve::grammar::json_schema_detail {

// ordered_json: `properties` are emitted in the order the schema lists them.
using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;             // nested subschemas (through $ref and allOf too)
constexpr uint64_t kMaxRepeat = 1000;     // largest minLength/maxLength/minItems/maxItems
constexpr uint64_t kMaxRepeatTotal = 40000;  // all of them together: each costs grammar rules
constexpr size_t kMaxGrammarBytes = size_t(1) << 20;
// Work bound, in subschemas compiled or inlined plus JSON values copied or written out: a small
// schema can multiply its work (anyOf siblings are merged into every branch, branches nest, $refs
// fan out). 200,000 steps take well under a second.
constexpr size_t kMaxWork = 200000;

// Adds `n` to `work`; past kMaxWork, GrammarError naming `path`.
void charge_work(size_t& work, size_t n, const std::string& path);

// GrammarError("json schema: <what> at <path>"), the path a JSON pointer into the schema.
[[noreturn]] void fail(const std::string& what, const std::string& path);
[[noreturn]] void fail_too_large();           // the grammar text would pass kMaxGrammarBytes
std::string where(const std::string& path);  // the pointer, or "the root"
std::string child_path(const std::string& path, std::string_view token);

// ---- json_schema_keywords.cpp ----

bool is_annotation(std::string_view keyword);
// The first keyword of `schema` that is neither an annotation nor in `allowed`.
std::optional<std::string> first_keyword_outside(const Json& schema, std::initializer_list<std::string_view> allowed);

std::vector<std::string> type_names(const Json& type);  // `type` as a list
// Without `type`, keywords that constrain one type only say which type is meant ({"properties":
// ...} is an object). Empty when the schema has none.
std::vector<std::string> implied_types(const Json& schema);
bool has_type(const Json& value, const std::string& type);
bool has_any(const Json& schema, std::initializer_list<const char*> keywords);
// minLength, maxItems, ...: absent, or a count up to kMaxRepeat (GrammarError beyond).
std::optional<uint64_t> count_keyword(const Json& schema, const char* keyword, const std::string& path);
size_t count_values(const Json& document);  // every value in it, nested ones included

// The document the schema came in: keyword checks and local $ref lookup.
class SchemaDoc {
 public:
  explicit SchemaDoc(const Json& root) : root_(root) {}
  // Refuses unknown keywords and malformed values of known ones.
  void check_keywords(const Json& schema, const std::string& path) const;
  struct Target {
    std::string pointer;  // normalized JSON pointer, "" for the root
    const Json* schema;
  };
  Target resolve(const Json& ref, const std::string& path) const;

 private:
  const Json& root_;
};

// The schema that holds exactly when all of `parts` hold (allOf, and $ref or anyOf/oneOf with
// sibling keywords): object keywords merged property by property, bounds tightened, types
// intersected. Top-level $ref and allOf inside the parts are inlined. nullopt when the parts
// provably match nothing (a false schema, no common type); GrammarError when they cannot be merged.
// Each subschema inlined is charged to `work`.
std::optional<Json> merge_schemas(const SchemaDoc& doc, const std::vector<std::pair<const Json*, std::string>>& parts,
                                  int depth, size_t& work);

// ---- json_schema_numbers.cpp ----

bool has_numeric_bounds(const Json& schema);
// GBNF alternatives for the integers (integer_only) or numbers the bounds admit; empty when none.
// Numbers: every integer in range, and a fraction only after an integer part whose whole unit
// interval is in range (no exponents), so "0.5" passes [0, 1] but not (0, 1].
std::vector<std::string> bounded_number_alternatives(const Json& schema, bool integer_only,
                                                     const std::string& fraction_rule);

// ---- json_schema_strings.cpp ----

// Where the parts put the rules they need.
class RuleSink {
 public:
  virtual ~RuleSink() = default;
  virtual std::string fresh_name(const std::string& hint) = 0;  // unique, valid, not yet defined
  virtual void add_rule(const std::string& name, std::string body) = 0;
  virtual std::string fixed(std::string_view name) = 0;  // a fixed rule, defined on first use
};

struct FixedRule {
  std::string_view name, body;
  std::string_view deps;  // fixed rules the body uses, space-separated
};
const std::vector<FixedRule>& fixed_rules();

std::string gbnf_literal(std::string_view bytes);  // "..." matching exactly these bytes
bool is_single_term(const std::string& gbnf);       // a rule name or one literal
// A valid rule name from a hint, never one the GBNF parser uses for its own helper rules.
std::string rule_name_base(const std::string& hint);
std::string repeat_suffix(uint64_t min, std::optional<uint64_t> max);  // "{m,n}", "*", ...; nullopt: no max
// The fixed rule for a `format` value; GrammarError for the others.
std::string format_rule(const std::string& format, const std::string& path, RuleSink& sink);
// A term for a JSON string (quotes included) whose decoded value the regex matches in full.
std::string pattern_string(const std::string& pattern, const std::string& path, const std::string& hint,
                           RuleSink& sink);
// A term for an object key (quotes included) that is none of `names`. Keys are unescaped text
// only: an escape could spell a listed name ("\u0061" is "a").
std::string key_other_than(const std::vector<std::string>& names, const std::string& hint, RuleSink& sink);

}  // namespace flashserve::grammar::json_schema_detail
