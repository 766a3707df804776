// JSON Schema compiled to GBNF: the grammar's sentences are JSON texts that validate against the
// schema (OpenAI's response_format json_schema, tool parameters). Supported keywords are listed in
// docs/structured-output.md; any other keyword is refused (GrammarError naming it), never ignored.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace flashserve::grammar {

struct JsonSchemaOptions {
  // OpenAI's strict mode: objects allow no properties beyond `properties` unless the schema says
  // otherwise (additionalProperties defaults to false instead of true).
  bool strict = false;
  // The rule that matches the whole document. Another name than "root" lets a caller embed the
  // document in a grammar of its own (a tool call inside <tool_call> tags): "root" stays reserved
  // for that caller, and no rule of the schema's takes either name.
  std::string document_rule = "root";
};

// GBNF with a rule named `options.document_rule` for the whole document. Object properties must appear in the order
// the schema lists them: pass the schema as ordered_json to keep the order it was written in
// (nlohmann::json sorts keys, so its overload emits properties alphabetically).
std::string json_schema_to_gbnf(const nlohmann::json& schema, const JsonSchemaOptions& options = {});
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options = {});

// `{"type": "json_object"}`: any JSON object.
std::string any_json_object_gbnf();

}  // namespace flashserve::grammar
