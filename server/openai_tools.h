// OpenAI's tool calling on /v1/chat/completions: `tools`, `tool_choice`, `parallel_tool_calls`.
// The tools reach the model through the chat template (model/tool_prompt.h); its <tool_call>
// blocks come back as `tool_calls` (server/tool_call_parser.h). `required` and a named function
// force a valid call with a grammar: the call's JSON follows the function's parameters schema.
#pragma once
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

namespace flashserve {

enum class ToolChoice { None, Auto, Required, Named };

struct ToolCalling {
  nlohmann::ordered_json tools;    // as the client sent them (the template renders them)
  std::vector<std::string> names;  // the functions' names, in order
  ToolChoice choice = ToolChoice::Auto;
  std::string forced_name;         // Named: the function to call
  bool parallel = true;            // parallel_tool_calls: more than one call in one answer

  // Whether a grammar makes the answer a call (required, or a named function).
  bool forced() const { return choice == ToolChoice::Required || choice == ToolChoice::Named; }
};

// The request's tools; nullopt when it has none. Malformed fields are a 400 naming the field;
// the legacy `functions` / `function_call` are refused with a pointer to `tools`.
std::optional<ToolCalling> requested_tools(const nlohmann::ordered_json& body);

// GBNF whose sentences are the calls the request allows: <tool_call> blocks around
// {"name": <one of the offered functions>, "arguments": <an object valid for its parameters>};
// one block for a named function or when parallel calls are off, one or more otherwise.
// Throws grammar::GrammarError when a parameters schema cannot be compiled.
std::string tool_call_gbnf(const ToolCalling& tools);

}  // namespace flashserve
