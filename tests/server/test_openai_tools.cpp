// Tool-calling fields (server/openai_tools.h): what is refused, and the grammar that forces a call
// accepting exactly the calls the request allows.
#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "server/openai_protocol.h"
#include "server/openai_tools.h"

namespace flashserve {
namespace {

const json kWeather = json::parse(R"({"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"},
  "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"], "additionalProperties": false}}})");
// The shape pydantic gives a model with a nested model: $defs and a "#/$defs/..." reference.
const json kBook = json::parse(R"({"type": "function", "function": {"name": "book", "strict": true,
  "parameters": {"$defs": {"Person": {"type": "object", "properties": {"name": {"type": "string"}},
  "required": ["name"], "additionalProperties": false}}, "type": "object",
  "properties": {"guest": {"$ref": "#/$defs/Person"}, "nights": {"type": "integer", "minimum": 1}},
  "required": ["guest", "nights"], "additionalProperties": false}}})");
const json kNoParams = json::parse(R"({"type": "function", "function": {"name": "ping"}})");

json body_with(json tools, json choice = nullptr) {
  json b = {{"messages", json::array()}, {"tools", std::move(tools)}};
  if (!choice.is_null()) b["tool_choice"] = std::move(choice);
  return b;
}

std::string refusal(const json& body) {
  try {
    requested_tools(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    return e.param + ": " + e.what();
  }
  return "accepted";
}

TEST(OpenAiTools, Choices) {
  EXPECT_FALSE(requested_tools(json{{"messages", json::array()}}));
  EXPECT_FALSE(requested_tools(body_with(json::array())));
  auto t = requested_tools(body_with({kWeather, kBook}));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->choice, ToolChoice::Auto);
  EXPECT_TRUE(t->parallel);
  EXPECT_EQ(t->names, (std::vector<std::string>{"get_weather", "book"}));
  EXPECT_EQ(requested_tools(body_with({kWeather}, "none"))->choice, ToolChoice::None);
  EXPECT_EQ(requested_tools(body_with({kWeather}, "required"))->choice, ToolChoice::Required);
  t = requested_tools(body_with({kWeather, kBook}, {{"type", "function"}, {"function", {{"name", "book"}}}}));
  EXPECT_EQ(t->choice, ToolChoice::Named);
  EXPECT_EQ(t->forced_name, "book");
  json b = body_with({kWeather});
  b["parallel_tool_calls"] = false;
  EXPECT_FALSE(requested_tools(b)->parallel);
}

TEST(OpenAiTools, MalformedFieldsAreRefusedByName) {
  json no_tools = {{"tool_choice", "required"}};
  EXPECT_EQ(refusal(no_tools), "tool_choice: 'tool_choice' is only allowed when 'tools' are given");
  EXPECT_EQ(refusal(json{{"tool_choice", "none"}}), "accepted");
  EXPECT_TRUE(refusal(body_with(5)).starts_with("tools: "));
  EXPECT_TRUE(refusal(body_with({{{"type", "code_interpreter"}}})).starts_with("tools: "));
  EXPECT_TRUE(refusal(body_with({{{"type", "function"}, {"function", {{"name", "has space"}}}}})).starts_with("tools: "));
  EXPECT_TRUE(refusal(body_with({{{"type", "function"}, {"function", {{"name", std::string(65, 'x')}}}}})).starts_with("tools: "));
  EXPECT_TRUE(refusal(body_with({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", "x"}}}}})).starts_with("tools: "));
  EXPECT_TRUE(refusal(body_with({{{"type", "function"}, {"function", {{"name", "f"}, {"extra", 1}}}}})).starts_with("tools: "));
  EXPECT_EQ(refusal(body_with({kWeather, kWeather})), "tools: 'tools' names the function 'get_weather' twice");
  EXPECT_TRUE(refusal(body_with({kWeather}, "sometimes")).starts_with("tool_choice: "));
  EXPECT_TRUE(refusal(body_with({kWeather}, {{"type", "function"}, {"function", {{"name", "book"}}}})).starts_with("tool_choice: "));
  EXPECT_TRUE(refusal(body_with({kWeather}, {{"type", "function"}})).starts_with("tool_choice: "));
  json b = body_with({kWeather});
  b["parallel_tool_calls"] = "yes";
  EXPECT_TRUE(refusal(b).starts_with("parallel_tool_calls: "));
  EXPECT_TRUE(refusal(json{{"functions", json::array({kWeather["function"]})}}).starts_with("functions: "));
  json many = json::array();
  for (int i = 0; i < 129; ++i) many.push_back({{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
  EXPECT_TRUE(refusal(body_with(many)).starts_with("tools: "));
}

bool accepts(const std::string& gbnf, const std::string& text) {
  grammar::Matcher m(std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf)));
  return m.advance(text) && m.can_end();
}

std::string block(const std::string& call) { return "<tool_call>\n" + call + "\n</tool_call>"; }

TEST(OpenAiTools, RequiredAllowsAnyOfferedCallOneOrMoreTimes) {
  const std::string g = tool_call_gbnf(*requested_tools(body_with({kWeather, kBook, kNoParams}, "required")));
  const std::string weather = R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}})";
  const std::string booking = R"({"name": "book", "arguments": {"guest": {"name": "Ada"}, "nights": 2}})";
  const std::string ping = R"({"name": "ping", "arguments": {}})";
  EXPECT_TRUE(accepts(g, block(weather)));
  EXPECT_TRUE(accepts(g, block(booking)));
  EXPECT_TRUE(accepts(g, block(ping)));
  EXPECT_TRUE(accepts(g, block(weather) + "\n" + block(booking)));
  EXPECT_FALSE(accepts(g, ""));
  EXPECT_FALSE(accepts(g, "Sure! " + block(weather)));
  EXPECT_FALSE(accepts(g, block(R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "kelvin"}})")));
  EXPECT_FALSE(accepts(g, block(R"({"name": "get_weather", "arguments": {"city": "Paris"}})")));
  EXPECT_FALSE(accepts(g, block(R"({"name": "book", "arguments": {"guest": {"name": "Ada"}, "nights": 0}})")));
  EXPECT_FALSE(accepts(g, block(R"({"name": "book", "arguments": {"guest": "Ada", "nights": 2}})")));
  EXPECT_FALSE(accepts(g, block(R"({"name": "other", "arguments": {}})")));
  EXPECT_FALSE(accepts(g, block(R"({"arguments": {}, "name": "ping"})")));
}

TEST(OpenAiTools, NamedOrNotParallelAllowsOneCall) {
  const std::string named =
      tool_call_gbnf(*requested_tools(body_with({kWeather, kBook}, {{"type", "function"}, {"function", {{"name", "book"}}}})));
  const std::string booking = block(R"({"name": "book", "arguments": {"guest": {"name": "Ada"}, "nights": 2}})");
  EXPECT_TRUE(accepts(named, booking));
  EXPECT_FALSE(accepts(named, booking + "\n" + booking));
  EXPECT_FALSE(accepts(named, block(R"({"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}})")));
  json b = body_with({kWeather, kBook}, "required");
  b["parallel_tool_calls"] = false;
  const std::string single = tool_call_gbnf(*requested_tools(b));
  EXPECT_TRUE(accepts(single, booking));
  EXPECT_FALSE(accepts(single, booking + "\n" + booking));
}

TEST(OpenAiTools, ParametersThatCannotBeEnforcedAreAGrammarError) {
  const json odd = {{"type", "function"},
                    {"function", {{"name", "odd"}, {"parameters", {{"type", "object"}, {"not", json::object()}}}}}};
  EXPECT_THROW(tool_call_gbnf(*requested_tools(body_with({odd}, "required"))), grammar::GrammarError);
}

}  // namespace
}  // namespace flashserve
