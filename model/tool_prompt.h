// Tool calling in the prompt. Models trained on Hermes-style calls (Qwen 2.5/3, Hermes, SmolLM3)
// ship templates that render `tools` and <tool_call> blocks themselves; for every other template
// the conversation is rewritten into plain messages that teach the same format, so the server
// parses one output format whatever the model:
//
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
#pragma once
#include <nlohmann/json.hpp>

#include "model/chat_template.h"

namespace flashserve {

// Whether `t` renders a `tools` list itself and writes calls as <tool_call> blocks.
bool renders_hermes_tools(const ChatTemplate& t);

// For templates that render tools: the messages with each tool call's `arguments` (a JSON string
// in OpenAI's API) parsed into an object, which is what such templates expect to print.
nlohmann::ordered_json with_argument_objects(const nlohmann::ordered_json& messages);

// For the others: `tools` (OpenAI's list, or null) described in the system message, assistant
// tool_calls written out as <tool_call> blocks, and tool results as user turns wrapped in
// <tool_response> (consecutive results share one turn). Messages are {role, content, tool_calls?}
// with string content.
nlohmann::ordered_json with_tools_as_text(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools);

}  // namespace flashserve
