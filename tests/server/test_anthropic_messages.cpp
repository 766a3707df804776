// Anthropic's Messages API without HTTP: a request read into the chat request it stands for (the
// same prompt, sampling and tools), refusals naming their field, and the MessagesWriter's answer
// from engine events (the message object, the named stream events with text and tool_use blocks,
// stop reasons, errors in Anthropic's shape).
#include <gtest/gtest.h>

#include "server/messages_request.h"
#include "server/messages_writer.h"
#include "tests/server/http_harness.h"

namespace flashserve::test {
namespace {

using Body = flashserve::json;  // ordered, as the server parses bodies

const Body kSchema = Body::parse(R"({"type": "object", "properties": {"mode": {"enum": ["fast", "slow"]},
  "loud": {"type": "boolean"}}, "required": ["mode"]})");

class MessagesRequestTest : public ::testing::Test {
 protected:
  // Tools make prompts of hundreds of byte-level tokens: a longer context than the default tiny model's.
  static void SetUpTestSuite() {
    TinyModelSpec spec = tiny_spec_for_server();
    spec.context_len = 2048;
    model_ = load_tiny_model(spec, "messages");
    serving_ = new Serving(*model_, "test-model", test_engine_options(8 << 20), nullptr);
  }
  static void TearDownTestSuite() {
    delete serving_;
    serving_ = nullptr;
    model_.reset();
  }
  static Body body(Body messages = Body::array({{{"role", "user"}, {"content", "hi"}}})) {
    return {{"model", "test-model"}, {"max_tokens", 16}, {"messages", std::move(messages)}};
  }
  static MessagesRequest parse(const Body& b) { return parse_messages_request(b, *serving_); }
  // The message of the 400 the body gets ("" if accepted).
  static std::string refusal(const Body& b) {
    try {
      parse(b);
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << e.what();
      return e.what();
    }
    return "";
  }
  static std::unique_ptr<Model> model_;
  static Serving* serving_;
};
std::unique_ptr<Model> MessagesRequestTest::model_;
Serving* MessagesRequestTest::serving_ = nullptr;

// A conversation with a system prompt in blocks, an earlier tool call and its result, read as the
// chat request with the same messages: the same prompt tokens, max_tokens and tools.
TEST_F(MessagesRequestTest, ConversationReadsAsTheEquivalentChat) {
  Body b = body(Body::parse(R"([
    {"role": "user", "content": "switch to fast mode"},
    {"role": "assistant", "content": [{"type": "text", "text": "Switching."},
      {"type": "tool_use", "id": "toolu_1", "name": "set_mode", "input": {"mode": "fast", "loud": false}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "done"}]},
      {"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}}]}])"));
  b["system"] = Body::parse(R"([{"type": "text", "text": "Be brief."}, {"type": "text", "text": " Use tools."}])");
  b["tools"] = Body::array({{{"name", "set_mode"}, {"description", "Sets the mode"}, {"input_schema", kSchema}}});
  const Body chat = {
      {"model", "test-model"},
      {"max_tokens", 16},
      {"messages", Body::parse(R"([
        {"role": "system", "content": "Be brief. Use tools."},
        {"role": "user", "content": "switch to fast mode"},
        {"role": "assistant", "content": "Switching.", "tool_calls": [{"id": "toolu_1", "type": "function",
          "function": {"name": "set_mode", "arguments": "{\"mode\":\"fast\",\"loud\":false}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "done"},
        {"role": "user", "content": "thanks"}])")},
      {"tools", Body::array({{{"type", "function"},
                              {"function", {{"name", "set_mode"}, {"description", "Sets the mode"}, {"parameters", kSchema}}}}})}};
  const MessagesRequest r = parse(b);
  const GenerationRequest expected = parse_chat_request(chat, *serving_);
  EXPECT_EQ(r.generation.prompts, expected.prompts);
  EXPECT_EQ(r.generation.max_tokens, 16);
  ASSERT_TRUE(r.generation.tools);
  EXPECT_EQ(r.generation.tools->names, std::vector<std::string>{"set_mode"});
  EXPECT_EQ(r.generation.tools->choice, ToolChoice::Auto);
  // count_tokens counts the same prompt.
  b.erase("max_tokens");
  EXPECT_EQ(count_message_tokens(b, *serving_), int64_t(expected.prompts[0].size()));
}

// A failed tool gets its result marked in the text: chat tool messages carry no error flag.
TEST_F(MessagesRequestTest, ErrorToolResultIsMarkedInItsText) {
  auto with_result = [](Body result) {
    Body b = body(Body::array({{{"role", "user"}, {"content", "go"}},
                               {{"role", "assistant"},
                                {"content", Body::array({{{"type", "tool_use"}, {"id", "t1"}, {"name", "set_mode"},
                                                          {"input", Body::object()}}})}},
                               {{"role", "user"}, {"content", Body::array({std::move(result)})}}}));
    b["tools"] = Body::array({{{"name", "set_mode"}, {"input_schema", kSchema}}});
    return b;
  };
  const Body failed = with_result({{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", "boom"}, {"is_error", true}});
  const Body marked = with_result({{"type", "tool_result"}, {"tool_use_id", "t1"}, {"content", "Error: boom"}});
  EXPECT_EQ(parse(failed).generation.prompts, parse(marked).generation.prompts);
}

TEST_F(MessagesRequestTest, SamplingAndStopSequences) {
  Body b = body();
  b["temperature"] = 0.5;
  b["top_p"] = 0.9;
  b["top_k"] = 40;
  b["stop_sequences"] = {"END", "\n\n"};
  b["stream"] = true;
  b["metadata"] = {{"user_id", "u-1"}};
  b["thinking"] = {{"type", "disabled"}};
  b["service_tier"] = "auto";
  const MessagesRequest r = parse(b);
  EXPECT_FLOAT_EQ(r.generation.params.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.generation.params.top_p, 0.9f);
  EXPECT_EQ(r.generation.params.top_k, 40);
  EXPECT_EQ(r.generation.params.stop, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_EQ(r.stop_sequences, (std::vector<std::string>{"END", "\n\n"}));
  EXPECT_TRUE(r.generation.stream);
}

TEST_F(MessagesRequestTest, ToolChoiceKinds) {
  Body b = body();
  b["tools"] = Body::array({{{"name", "set_mode"}, {"input_schema", kSchema}}, {{"name", "reset"}, {"input_schema", {{"type", "object"}}}}});
  b["tool_choice"] = {{"type", "any"}};
  EXPECT_EQ(parse(b).generation.tools->choice, ToolChoice::Required);
  b["tool_choice"] = {{"type", "tool"}, {"name", "reset"}};
  const MessagesRequest named = parse(b);
  EXPECT_EQ(named.generation.tools->choice, ToolChoice::Named);
  EXPECT_EQ(named.generation.tools->forced_name, "reset");
  EXPECT_TRUE(named.generation.params.grammar);  // the call is forced
  b["tool_choice"] = {{"type", "none"}};
  EXPECT_FALSE(parse(b).generation.tools);  // tools left out of the prompt
  // Without parallel calls, auto ends the answer after its first call.
  b["tool_choice"] = {{"type", "auto"}, {"disable_parallel_tool_use", true}};
  const MessagesRequest single = parse(b);
  EXPECT_FALSE(single.generation.tools->parallel);
  EXPECT_EQ(single.generation.params.stop, std::vector<std::string>{"</tool_call>"});
  EXPECT_TRUE(single.stop_sequences.empty());  // the server's stop is not the client's
  // ... which leaves room for three of the client's; the refusal names the fields the client wrote.
  b["stop_sequences"] = {"a", "b", "c", "d"};
  const std::string refused = refusal(b);
  EXPECT_NE(refused.find("'disable_parallel_tool_use' true, 'stop_sequences' may hold at most 3"), std::string::npos)
      << refused;
}

TEST_F(MessagesRequestTest, RefusalsNameTheField) {
  auto refused = [](Body b, const char* key, Body value) {
    b[key] = std::move(value);
    return refusal(b);
  };
  EXPECT_EQ(refusal(body()), "");
  EXPECT_NE(refused(body(), "frequency", 1).find("frequency"), std::string::npos);
  EXPECT_NE(refused(body(), "n", 2).find("argument supplied: n"), std::string::npos) << "an OpenAI field is unknown here";
  EXPECT_NE(refused(body(), "thinking", {{"type", "enabled"}, {"budget_tokens", 2048}}).find("'thinking'"), std::string::npos);
  EXPECT_NE(refused(body(), "temperature", 1.5).find("'temperature' must be in [0, 1]"), std::string::npos);
  EXPECT_NE(refused(body(), "stop_sequences", {"a", "b", "c", "d", "e"}).find("'stop_sequences'"), std::string::npos);
  EXPECT_NE(refused(body(), "service_tier", "priority").find("'service_tier'"), std::string::npos);
  EXPECT_NE(refused(body(), "metadata", {{"user_id", 7}}).find("'metadata.user_id'"), std::string::npos);
  EXPECT_NE(refused(body(), "cache_control", {{"type", "persistent"}}).find("'cache_control'"), std::string::npos);
  EXPECT_NE(refused(body(), "tools", Body::array({{{"type", "web_search_20250305"}, {"name", "web_search"}}}))
                .find("'tools[0].type'"),
            std::string::npos);
  EXPECT_NE(refused(body(), "tools", Body::array({{{"name", "f"}}})).find("'tools[0].input_schema'"), std::string::npos);
  Body no_max = body();
  no_max.erase("max_tokens");
  EXPECT_NE(refusal(no_max).find("'max_tokens' is required"), std::string::npos);
  Body no_model = body();
  no_model.erase("model");
  EXPECT_NE(refusal(no_model).find("'model' is required"), std::string::npos);
}

TEST_F(MessagesRequestTest, RefusedContent) {
  const Body image = {{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", "AA=="}}}};
  EXPECT_NE(refusal(body(Body::array({{{"role", "user"}, {"content", Body::array({image})}}})))
                .find("'messages[0].content[0].type' 'image'"),
            std::string::npos);
  const Body thinking = {{"type", "thinking"}, {"thinking", "hmm"}, {"signature", "s"}};
  EXPECT_EQ(refusal(body(Body::array({{{"role", "user"}, {"content", "a"}},
                                      {{"role", "assistant"}, {"content", Body::array({thinking})}},
                                      {{"role", "user"}, {"content", "b"}}}))),
            "");  // earlier thinking goes back to the template as reasoning_content
  const Body redacted = {{"type", "redacted_thinking"}, {"data", "x"}};
  EXPECT_NE(refusal(body(Body::array({{{"role", "user"}, {"content", "a"}},
                                      {{"role", "assistant"}, {"content", Body::array({redacted})}},
                                      {{"role", "user"}, {"content", "b"}}})))
                .find("redacted thinking"),
            std::string::npos);
  EXPECT_NE(refusal(body(Body::array({{{"role", "user"}, {"content", "a"}}, {{"role", "assistant"}, {"content", "The answer is"}}})))
                .find("prefill"),
            std::string::npos);
  EXPECT_NE(refusal(body(Body::array({{{"role", "system"}, {"content", "a"}}}))).find("'messages[0].role'"),
            std::string::npos);
  const Body bad_input = {{"type", "tool_use"}, {"id", "t"}, {"name", "f"}, {"input", "x"}};
  EXPECT_NE(refusal(body(Body::array({{{"role", "user"}, {"content", "a"}},
                                      {{"role", "assistant"}, {"content", Body::array({bad_input})}},
                                      {{"role", "user"}, {"content", "b"}}})))
                .find("'messages[1].content[0].input' must be an object"),
            std::string::npos);
  EXPECT_NE(refusal(body(Body::array())).find("'messages'"), std::string::npos);
}

// --- MessagesWriter ------------------------------------------------------------------------------

RequestOutput text_event(std::string text, int32_t num_output_tokens) {
  RequestOutput o;
  o.tokens.push_back({'a', -0.1f, {}});
  o.text = std::move(text);
  o.num_output_tokens = num_output_tokens;
  o.num_cached_tokens = 1;
  return o;
}

RequestOutput last_event(std::string text, int32_t num_output_tokens, FinishReason finish,
                         std::optional<std::string> stop_string = std::nullopt) {
  RequestOutput o = text_event(std::move(text), num_output_tokens);
  o.finish = finish;
  o.stop_string = std::move(stop_string);
  return o;
}

GenerationRequest generation(bool stream, bool with_tools) {
  GenerationRequest r;
  r.endpoint = Endpoint::Chat;
  r.prompts = {{1, 2, 3, 4}};
  r.stream = stream;
  if (with_tools) {
    ToolCalling t;
    t.names = {"set_mode"};
    r.tools = t;
  }
  return r;
}

const char* kCall = "<tool_call>\n{\"name\": \"set_mode\", \"arguments\": {\"mode\": \"fast\"}}\n</tool_call>";

TEST(MessagesWriter, WholeMessage) {
  const GenerationRequest r = generation(false, false);
  MessagesWriter w(r, {}, "test-model");
  EXPECT_EQ(w.add({{0, text_event("Hello", 1)}, {0, last_event(" there", 2, FinishReason::Stop)}}), "");
  const json m = json::parse(w.finish());
  EXPECT_TRUE(m["id"].get<std::string>().starts_with("msg_")) << m;
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["model"], "test-model");
  EXPECT_EQ(m["content"], json::parse(R"([{"type": "text", "text": "Hello there"}])"));
  EXPECT_EQ(m["stop_reason"], "end_turn");
  EXPECT_TRUE(m["stop_sequence"].is_null());
  // Anthropic counts cache reads apart: input_tokens + cache_read_input_tokens is the whole prompt.
  EXPECT_EQ(m["usage"], json::parse(R"({"input_tokens": 3, "cache_creation_input_tokens": 0,
                                        "cache_read_input_tokens": 1, "output_tokens": 2})"));
}

TEST(MessagesWriter, StopReasons) {
  auto answer = [](std::vector<std::string> stop_sequences, const RequestOutput& last, bool with_tools = false) {
    const GenerationRequest r = generation(false, with_tools);
    MessagesWriter w(r, std::move(stop_sequences), "m");
    w.add({{0, last}});
    return json::parse(w.finish());
  };
  json m = answer({"END"}, last_event("a", 1, FinishReason::Stop, "END"));
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "END");
  EXPECT_EQ(answer({}, last_event("a", 5, FinishReason::Length))["stop_reason"], "max_tokens");
  // The server's own stop after a single call is no stop sequence of the client's.
  m = answer({"END"}, last_event(std::string(kCall).substr(0, std::string(kCall).size() - 12), 9, FinishReason::Stop,
                                 "</tool_call>"),
             true);
  EXPECT_EQ(m["stop_reason"], "tool_use") << m;
  EXPECT_TRUE(m["stop_sequence"].is_null());
  EXPECT_EQ(m["content"][0]["input"], json::parse(R"({"mode": "fast"})")) << m;
}

TEST(MessagesWriter, TextThenToolUse) {
  const GenerationRequest r = generation(false, true);
  MessagesWriter w(r, {}, "m");
  w.add({{0, text_event("Sure.", 1)}, {0, last_event(std::string("\n") + kCall, 9, FinishReason::Stop)}});
  const json m = json::parse(w.finish());
  ASSERT_EQ(m["content"].size(), 2u) << m;
  EXPECT_EQ(m["content"][0], json::parse(R"({"type": "text", "text": "Sure."})"));
  const json& call = m["content"][1];
  EXPECT_EQ(call["type"], "tool_use");
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("toolu_")) << call;
  EXPECT_EQ(call["name"], "set_mode");
  EXPECT_EQ(call["input"], json::parse(R"({"mode": "fast"})"));
  EXPECT_EQ(m["stop_reason"], "tool_use");
}

// The event sequence of a streamed answer with a text block and a tool_use block, the call's
// input split over several events.
TEST(MessagesWriter, StreamEvents) {
  const GenerationRequest r = generation(true, true);
  MessagesWriter w(r, {}, "m");
  const std::string call = kCall;
  std::string sse = w.add({{0, text_event("Sure", 1)}});
  sse += w.add({{0, text_event(".\n" + call.substr(0, 40), 5)}});
  sse += w.add({{0, last_event(call.substr(40), 9, FinishReason::Stop)}});
  sse += w.finish();
  std::vector<std::string> names;
  std::string text, partial_json;
  for (const NamedEvent& e : sse_named_events(sse)) {
    names.push_back(e.name);
    EXPECT_EQ(e.data["type"], e.name);
    if (e.name == "content_block_delta" && e.data["delta"]["type"] == "text_delta") {
      EXPECT_EQ(e.data["index"], 0);
      text += e.data["delta"]["text"].get<std::string>();
    }
    if (e.name == "content_block_delta" && e.data["delta"]["type"] == "input_json_delta") {
      EXPECT_EQ(e.data["index"], 1);
      partial_json += e.data["delta"]["partial_json"].get<std::string>();
    }
  }
  const std::vector<NamedEvent> events = sse_named_events(sse);
  ASSERT_GE(events.size(), 9u);
  // Opening: the message with no content yet, then a ping.
  const json& start = events[0].data["message"];
  EXPECT_EQ(start["content"], json::array());
  EXPECT_TRUE(start["stop_reason"].is_null());
  EXPECT_EQ(start["usage"]["input_tokens"], 3);
  EXPECT_EQ(start["usage"]["output_tokens"], 0);
  EXPECT_EQ(names[1], "ping");
  EXPECT_EQ(events[2].data["content_block"], json::parse(R"({"type": "text", "text": ""})"));
  EXPECT_EQ(text, "Sure.");
  EXPECT_EQ(json::parse(partial_json), json::parse(R"({"mode": "fast"})"));
  // Each block is opened, filled and closed in turn; the message then ends.
  std::vector<std::string> shape;
  for (const std::string& n : names) {
    if (shape.empty() || shape.back() != n) shape.push_back(n);
  }
  EXPECT_EQ(shape, (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                             "content_block_stop", "content_block_start", "content_block_delta",
                                             "content_block_stop", "message_delta", "message_stop"}));
  const auto tool_start = std::find_if(events.begin(), events.end(), [](const NamedEvent& e) {
    return e.name == "content_block_start" && e.data["index"] == 1;
  });
  ASSERT_NE(tool_start, events.end());
  EXPECT_EQ(tool_start->data["content_block"]["name"], "set_mode");
  EXPECT_EQ(tool_start->data["content_block"]["input"], json::object());
  const json& delta = events[events.size() - 2].data;
  EXPECT_EQ(delta["delta"], json::parse(R"({"stop_reason": "tool_use", "stop_sequence": null})"));
  EXPECT_EQ(delta["usage"]["output_tokens"], 9);
}

TEST(MessagesWriter, StreamedStopSequence) {
  const GenerationRequest r = generation(true, false);
  MessagesWriter w(r, {"END"}, "m");
  std::string sse = w.add({{0, last_event("a", 1, FinishReason::Stop, "END")}});
  sse += w.finish();
  const std::vector<NamedEvent> events = sse_named_events(sse);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[events.size() - 2].data["delta"], json::parse(R"({"stop_reason": "stop_sequence", "stop_sequence": "END"})"));
}

TEST(MessagesWriter, ServerAbortIsAnErrorEvent) {
  const GenerationRequest r = generation(true, false);
  MessagesWriter w(r, {}, "m");
  w.add({{0, text_event("a", 1)}});
  RequestOutput abort;
  abort.finish = FinishReason::Abort;
  abort.error = RequestError{ErrorKind::Overloaded, "too busy"};
  const std::vector<NamedEvent> events = sse_named_events(w.add({{0, abort}}));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "error");
  EXPECT_EQ(events[0].data, json::parse(R"({"type": "error", "error": {"type": "rate_limit_error", "message": "too busy"}})"));
  ASSERT_TRUE(w.failure());
  EXPECT_EQ(w.finish(), "");
  // Shutdown of an unfinished stream, likewise.
  MessagesWriter w2(r, {}, "m");
  w2.add({{0, text_event("a", 1)}});
  const std::vector<NamedEvent> stopping = sse_named_events(w2.fail_unfinished({ErrorKind::Unavailable, "stopping"}));
  ASSERT_EQ(stopping.size(), 1u);
  EXPECT_EQ(stopping[0].data["error"]["type"], "overloaded_error");
}

TEST(MessagesWriter, ErrorShapes) {
  const GenerationRequest r = generation(false, false);
  const MessagesWriter w(r, {}, "m");
  const std::vector<std::pair<int, const char*>> cases = {
      {400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
      {404, "not_found_error"},       {413, "request_too_large"},    {429, "rate_limit_error"},
      {500, "api_error"},             {503, "overloaded_error"},     {504, "timeout_error"}};
  for (const auto& [status, type] : cases) {
    const json body = w.error_json(ApiError(status, "why", "whatever"));
    EXPECT_EQ(body, json({{"type", "error"}, {"error", {{"type", type}, {"message", "why"}}}})) << status;
  }
}

}  // namespace
}  // namespace flashserve::test
