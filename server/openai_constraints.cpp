#include "server/openai_constraints.h"

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "server/openai_json.h"

namespace flashserve {
namespace {

// {"name", "schema", "strict", "description"}, as OpenAI's structured outputs take it.
std::string json_schema_format(const json& format) {
  const json* spec = field(format, "json_schema");
  if (!spec || !spec->is_object()) {
    throw bad_request("'response_format.json_schema' (an object with 'name' and 'schema') is required", "response_format");
  }
  only_keys(*spec, {"name", "schema", "strict", "description"}, "response_format.json_schema", "response_format");
  const json* name = field(*spec, "name");
  if (!name || !name->is_string() || name->get<std::string>().empty()) {
    throw bad_request("'response_format.json_schema.name' must be a non-empty string", "response_format");
  }
  const json* schema = field(*spec, "schema");
  if (!schema || !(schema->is_object() || schema->is_boolean())) {
    throw bad_request("'response_format.json_schema.schema' must be a JSON Schema object", "response_format");
  }
  const json* strict = field(*spec, "strict");
  if (strict && !strict->is_boolean()) throw bad_request("'response_format.json_schema.strict' must be a boolean", "response_format");
  grammar::JsonSchemaOptions options;
  options.strict = strict && strict->get<bool>();
  return grammar::json_schema_to_gbnf(*schema, options);
}

std::optional<std::string> response_format_gbnf(const json& format) {
  if (!format.is_object()) throw bad_request("'response_format' must be an object", "response_format");
  const json* type = field(format, "type");
  if (!type || !type->is_string()) throw bad_request("'response_format.type' must be a string", "response_format");
  const std::string t = type->get<std::string>();
  if (t == "text") {
    only_keys(format, {"type"}, "response_format", "response_format");
    return std::nullopt;
  }
  if (t == "json_object") {
    only_keys(format, {"type"}, "response_format", "response_format");
    return grammar::any_json_object_gbnf();
  }
  if (t == "json_schema") {
    only_keys(format, {"type", "json_schema"}, "response_format", "response_format");
    return json_schema_format(format);
  }
  throw bad_request("'response_format.type' must be 'text', 'json_object' or 'json_schema', not '" + t + "'",
                    "response_format");
}

std::string string_field(const json& v, const char* key, const char* what) {
  if (!v.is_string() || v.get<std::string>().empty()) throw bad_request(std::string("'") + key + "' must be " + what, key);
  return v.get<std::string>();
}

}  // namespace

// A field's GBNF, with a grammar, schema or regex that cannot be compiled as a 400 naming it.
template <class F>
std::optional<std::string> field_gbnf(const char* key, F&& make) {
  try {
    return make();
  } catch (const grammar::GrammarError& e) {
    throw bad_request(e.what(), key);
  }
}

std::optional<RequestedGrammar> requested_grammar(const json& body) {
  std::optional<RequestedGrammar> out;
  auto take = [&](const char* key, std::optional<std::string> g) {
    if (!g) return;
    if (out) throw bad_request(std::string("'") + key + "' and '" + out->field + "' both constrain the output: give one", key);
    out = RequestedGrammar{std::move(*g), key};
  };
  if (const json* f = field(body, "response_format")) {
    take("response_format", field_gbnf("response_format", [&] { return response_format_gbnf(*f); }));
  }
  if (const json* r = field(body, "regex")) {
    const std::string pattern = string_field(*r, "regex", "a non-empty string (a regular expression)");
    take("regex", field_gbnf("regex", [&] { return std::optional(grammar::regex_to_gbnf(pattern)); }));
  }
  if (const json* g = field(body, "grammar")) {
    const std::string text = string_field(*g, "grammar", "a non-empty string (GBNF with a rule named root)");
    take("grammar", std::optional(text));  // compiling it reports its errors with line and column
  }
  return out;
}

}  // namespace flashserve
