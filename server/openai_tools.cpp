#include "server/openai_tools.h"

#include <algorithm>
#include <string_view>

#include "grammar/json_schema.h"
#include "server/openai_json.h"

namespace flashserve {
namespace {

constexpr size_t kMaxTools = 128;  // OpenAI's limit
constexpr size_t kMaxNameLength = 64;

bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= kMaxNameLength && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// {"type": "function", "function": {"name", "description", "parameters", "strict"}} -> its name.
std::string check_tool(const json& tool, size_t i) {
  const std::string where = "tools[" + std::to_string(i) + "]";
  if (!tool.is_object()) throw bad_request("'" + where + "' must be an object", "tools");
  only_keys(tool, {"type", "function"}, where, "tools");
  if (tool.value("type", json()) != "function") {
    throw bad_request("'" + where + ".type' must be 'function' (the only kind of tool this server runs)", "tools");
  }
  const json* fn = field(tool, "function");
  if (!fn || !fn->is_object()) throw bad_request("'" + where + ".function' must be an object", "tools");
  only_keys(*fn, {"name", "description", "parameters", "strict"}, where + ".function", "tools");
  const json* name = field(*fn, "name");
  if (!name || !name->is_string() || !valid_name(name->get<std::string>())) {
    throw bad_request("'" + where + ".function.name' must be 1 to 64 letters, digits, '_' or '-'", "tools");
  }
  if (const json* d = field(*fn, "description"); d && !d->is_string()) {
    throw bad_request("'" + where + ".function.description' must be a string", "tools");
  }
  if (const json* p = field(*fn, "parameters"); p && !p->is_object()) {
    throw bad_request("'" + where + ".function.parameters' must be a JSON Schema object", "tools");
  }
  if (const json* s = field(*fn, "strict"); s && !s->is_boolean()) {
    throw bad_request("'" + where + ".function.strict' must be a boolean", "tools");
  }
  return name->get<std::string>();
}

void parse_tool_choice(const json& body, ToolCalling& t) {
  const json* v = field(body, "tool_choice");
  if (!v) return;
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "none") t.choice = ToolChoice::None;
    else if (s == "auto") t.choice = ToolChoice::Auto;
    else if (s == "required") t.choice = ToolChoice::Required;
    else throw bad_request("'tool_choice' must be 'none', 'auto', 'required' or a named function, not '" + s + "'", "tool_choice");
    return;
  }
  const char* shape = "'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (!v->is_object() || v->value("type", json()) != "function") throw bad_request(shape, "tool_choice");
  only_keys(*v, {"type", "function"}, "tool_choice", "tool_choice");
  const json* fn = field(*v, "function");
  if (!fn || !fn->is_object() || !field(*fn, "name") || !(*fn)["name"].is_string()) throw bad_request(shape, "tool_choice");
  only_keys(*fn, {"name"}, "tool_choice.function", "tool_choice");
  const std::string name = (*fn)["name"].get<std::string>();
  if (std::find(t.names.begin(), t.names.end(), name) == t.names.end()) {
    throw bad_request("'tool_choice' names the function '" + name + "', which is not among 'tools'", "tool_choice");
  }
  t.choice = ToolChoice::Named;
  t.forced_name = name;
}

// A parameters schema moved under "#/$defs/<name>" of a bigger schema: its own "#..." references
// must point there too. Values of const, enum, default and examples are data, not schemas.
json rebased(const json& schema, const std::string& base) {
  if (schema.is_array()) {
    json out = json::array();
    for (const json& e : schema) out.push_back(rebased(e, base));
    return out;
  }
  if (!schema.is_object()) return schema;
  json out = json::object();
  for (const auto& [key, value] : schema.items()) {
    if (key == "$ref" && value.is_string() && value.get<std::string>().starts_with("#")) {
      out[key] = base + value.get<std::string>().substr(1);
    } else if (key == "const" || key == "enum" || key == "default" || key == "examples") {
      out[key] = value;
    } else {
      out[key] = rebased(value, base);
    }
  }
  return out;
}

}  // namespace

std::optional<ToolCalling> requested_tools(const json& body) {
  for (const char* legacy : {"functions", "function_call"}) {
    if (field(body, legacy)) {
      throw bad_request("'" + std::string(legacy) + "' is deprecated and not supported: use 'tools' and 'tool_choice'",
                        legacy, "unsupported_parameter");
    }
  }
  const json* tools = field(body, "tools");
  if (tools && !tools->is_array()) throw bad_request("'tools' must be an array of function tools", "tools");
  const json* parallel = field(body, "parallel_tool_calls");
  if (parallel && !parallel->is_boolean()) throw bad_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls");
  if (!tools || tools->empty()) {
    const json* choice = field(body, "tool_choice");
    if (choice && *choice != "none") throw bad_request("'tool_choice' is only allowed when 'tools' are given", "tool_choice");
    return std::nullopt;
  }
  if (tools->size() > kMaxTools) throw bad_request("'tools' may hold at most 128 functions", "tools");
  ToolCalling t;
  t.tools = *tools;
  for (size_t i = 0; i < tools->size(); ++i) {
    std::string name = check_tool((*tools)[i], i);
    if (std::find(t.names.begin(), t.names.end(), name) != t.names.end()) {
      throw bad_request("'tools' names the function '" + name + "' twice", "tools");
    }
    t.names.push_back(std::move(name));
  }
  parse_tool_choice(body, t);
  t.parallel = parallel ? parallel->get<bool>() : true;
  return t;
}

std::string tool_call_gbnf(const ToolCalling& t) {
  json defs = json::object();
  json calls = json::array();
  bool strict = true;
  for (size_t i = 0; i < t.names.size(); ++i) {
    if (t.choice == ToolChoice::Named && t.names[i] != t.forced_name) continue;
    const json& fn = t.tools[i]["function"];
    const std::string def = "tool-" + std::to_string(i);
    const json* params = field(fn, "parameters");
    defs[def] = params ? rebased(*params, "#/$defs/" + def) : json{{"type", "object"}, {"properties", json::object()}};
    strict = strict && fn.value("strict", false);
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", t.names[i]}}}, {"arguments", {{"$ref", "#/$defs/" + def}}}}},
                     {"required", {"name", "arguments"}},
                     {"additionalProperties", false}});
  }
  json schema = calls.size() == 1 ? calls[0] : json{{"anyOf", calls}};
  schema["$defs"] = std::move(defs);
  grammar::JsonSchemaOptions options;
  options.strict = strict;  // every function offered asked for OpenAI's strict mode
  options.document_rule = "call";
  const std::string block = R"("<tool_call>\n" call "\n</tool_call>")";
  const std::string more = t.choice == ToolChoice::Required && t.parallel ? " ( \"\\n\" " + block + " )*" : "";
  return "root ::= " + block + more + "\n" + grammar::json_schema_to_gbnf(schema, options);
}

}  // namespace flashserve
