#include "model/tool_prompt.h"

#include <string>

#include "model/bounded_json.h"

namespace flashserve {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kProbeName = "flashserve_probe_function";

std::string text_of(const Json& m, const char* key) {
  const auto it = m.find(key);
  return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string tools_system_text(const Json& tools) {
  std::string text =
      "# Tools\n\n"
      "You can call functions to help answer. Their signatures, one JSON object a line:\n<tools>\n";
  for (const Json& tool : tools) text += tool.dump() + "\n";
  text +=
      "</tools>\n\n"
      "To call a function, write a JSON object with its name and arguments between <tool_call> and </tool_call> "
      "tags, one call per pair of tags:\n"
      "<tool_call>\n{\"name\": \"function_name\", \"arguments\": {\"argument\": \"value\"}}\n</tool_call>";
  return text;
}

// An arguments string that holds a JSON object becomes that object; anything else stays as it is.
Json arguments_value(const Json& arguments) {
  if (!arguments.is_string()) return arguments;
  Json parsed = parse_bounded_json_or_discarded<Json>(arguments.get<std::string>());
  return parsed.is_object() ? parsed : arguments;
}

std::string calls_as_text(const Json& calls) {
  std::string text;
  for (const Json& call : calls) {
    const Json& fn = call.at("function");
    const Json body = {{"name", fn.at("name")}, {"arguments", arguments_value(fn.at("arguments"))}};
    text += (text.empty() ? "" : "\n") + std::string("<tool_call>\n") + body.dump() + "\n</tool_call>";
  }
  return text;
}

}  // namespace

bool renders_hermes_tools(const ChatTemplate& t) {
  if (t.source().find("<tool_call>") == std::string::npos) return false;
  const Json messages = Json::array({{{"role", "user"}, {"content", "hi"}}});
  const Json tools = Json::array({{{"type", "function"},
                                   {"function",
                                    {{"name", kProbeName},
                                     {"description", "probe"},
                                     {"parameters", {{"type", "object"}, {"properties", Json::object()}}}}}}});
  try {
    return t.render(messages, /*add_generation_prompt=*/true, tools).find(kProbeName) != std::string::npos;
  } catch (const ChatTemplateError&) {
    return false;
  }
}

Json with_argument_objects(const Json& messages) {
  Json out = messages;
  for (Json& m : out) {
    const auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (Json& call : *calls) {
      Json& fn = call.at("function");
      fn["arguments"] = arguments_value(fn.at("arguments"));
    }
  }
  return out;
}

Json with_tools_as_text(const Json& messages, const Json& tools) {
  Json out = Json::array();
  const bool describe = tools.is_array() && !tools.empty();
  if (describe && (messages.empty() || text_of(messages.front(), "role") != "system")) {
    out.push_back({{"role", "system"}, {"content", tools_system_text(tools)}});
  }
  bool last_was_tool_result = false;
  for (const Json& m : messages) {
    const std::string role = text_of(m, "role");
    std::string content = text_of(m, "content");
    if (role == "tool") {
      const std::string wrapped = "<tool_response>\n" + content + "\n</tool_response>";
      if (last_was_tool_result) {
        out.back()["content"] = out.back()["content"].get<std::string>() + "\n" + wrapped;
      } else {
        out.push_back({{"role", "user"}, {"content", wrapped}});
      }
      last_was_tool_result = true;
      continue;
    }
    last_was_tool_result = false;
    if (role == "system" && describe && out.empty()) content += "\n\n" + tools_system_text(tools);
    const auto calls = m.find("tool_calls");
    if (role == "assistant" && calls != m.end() && calls->is_array() && !calls->empty()) {
      content += (content.empty() ? "" : "\n") + calls_as_text(*calls);
    }
    out.push_back({{"role", role}, {"content", content}});
  }
  return out;
}

}  // namespace flashserve
