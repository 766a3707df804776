// Tools in the prompt (model/tool_prompt.h): which templates render them, and the plain-message
// rewrite used for the rest.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/gguf.h"
#include "model/tool_prompt.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

using Json = nlohmann::ordered_json;

const Json kTools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");

const Json kConversation = Json::parse(R"([
  {"role": "user", "content": "Weather in Paris and Rome?"},
  {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
    {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
  {"role": "tool", "tool_call_id": "call_2", "content": "21C"}])");

ChatTemplate real_template(const std::string& name) {
  const std::string path = std::string(FLASHSERVE_TEMPLATES_DIR) + "/" + name + ".jinja";
  std::ifstream in(path);
  EXPECT_TRUE(in) << "no " << path << " (run scripts/fetch_templates.sh)";
  std::stringstream text;
  text << in.rdbuf();
  return ChatTemplate::from_source(text.str(), "", "<|im_end|>");
}

TEST(ToolPrompt, HermesTemplatesAreRecognised) {
  EXPECT_TRUE(renders_hermes_tools(real_template("qwen2.5")));
  EXPECT_TRUE(renders_hermes_tools(real_template("qwen3")));
  // Renders tools, but its calls are not <tool_call> blocks.
  EXPECT_FALSE(renders_hermes_tools(real_template("llama-3.1")));
  EXPECT_FALSE(renders_hermes_tools(ChatTemplate::builtin(ChatFormat::ChatML, "", "<|im_end|>")));
  auto f = GgufFile::open(test::real_model_path());
  EXPECT_FALSE(renders_hermes_tools(
      ChatTemplate::from_source(f->get_string("tokenizer.chat_template"), "<|im_start|>", "<|im_end|>")));
  // Mentions the tag but never prints the tools.
  EXPECT_FALSE(renders_hermes_tools(ChatTemplate::from_source(
      "{# <tool_call> #}{% for m in messages %}{{ m.content }}{% endfor %}", "", "")));
}

TEST(ToolPrompt, HermesTemplateGetsArgumentObjects) {
  const ChatTemplate t = real_template("qwen2.5");
  const std::string text = t.render(with_argument_objects(kConversation), true, kTools);
  EXPECT_NE(text.find("\"name\": \"get_weather\""), std::string::npos) << text;
  // The arguments are printed as an object, not as a quoted string.
  EXPECT_NE(text.find("\"arguments\": {\"city\": \"Paris\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("<tool_response>\n18C\n</tool_response>"), std::string::npos) << text;
}

TEST(ToolPrompt, OtherTemplatesGetPlainMessages) {
  const Json out = with_tools_as_text(kConversation, kTools);
  ASSERT_EQ(out.size(), 4u);
  // A system message describing the tools comes first.
  EXPECT_EQ(out[0]["role"], "system");
  const std::string system = out[0]["content"];
  EXPECT_NE(system.find(kTools[0].dump()), std::string::npos);
  EXPECT_NE(system.find("<tool_call>"), std::string::npos);
  EXPECT_EQ(out[1], (Json{{"role", "user"}, {"content", "Weather in Paris and Rome?"}}));
  EXPECT_EQ(out[2]["role"], "assistant");
  EXPECT_EQ(out[2]["content"],
            "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}\n</tool_call>\n"
            "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Rome\"}}\n</tool_call>");
  // Both results in one user turn.
  EXPECT_EQ(out[3], (Json{{"role", "user"},
                          {"content", "<tool_response>\n18C\n</tool_response>\n<tool_response>\n21C\n</tool_response>"}}));

  // A system message of the client's own keeps its text, with the tools after it.
  Json with_system = kConversation;
  with_system.insert(with_system.begin(), Json{{"role", "system"}, {"content", "Be brief."}});
  const Json out2 = with_tools_as_text(with_system, kTools);
  ASSERT_EQ(out2.size(), 4u);
  EXPECT_TRUE(out2[0]["content"].get<std::string>().starts_with("Be brief.\n\n# Tools"));

  // No tools: only the conversation is rewritten.
  const Json plain = with_tools_as_text(kConversation, nullptr);
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain[0]["role"], "user");
  EXPECT_EQ(plain[2]["role"], "user");
}

TEST(ToolPrompt, ArgumentsThatAreNotAnObjectStayText) {
  Json conv = kConversation;
  conv[1]["tool_calls"][0]["function"]["arguments"] = "not json";
  EXPECT_EQ(with_argument_objects(conv)[1]["tool_calls"][0]["function"]["arguments"], "not json");
  EXPECT_EQ(with_argument_objects(kConversation)[1]["tool_calls"][1]["function"]["arguments"], (Json{{"city", "Rome"}}));
}

}  // namespace
}  // namespace flashserve
