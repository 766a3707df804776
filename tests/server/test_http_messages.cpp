// Anthropic's Messages API over HTTP on the tiny random model: the key as Anthropic's clients send
// it, errors in Anthropic's shape on every failure path, count_tokens, and the streamed answer
// equal to the whole one (text, a forced tool_use block, stop reasons).
#include <gtest/gtest.h>

#include "tests/server/http_harness.h"
#include "tests/util/server_process.h"

namespace flashserve::test {
namespace {

const json kTools = json::parse(R"([{"name": "set_mode", "description": "Sets the mode", "input_schema": {
  "type": "object", "properties": {"mode": {"enum": ["fast", "slow"]}, "loud": {"type": "boolean"}},
  "required": ["mode", "loud"], "additionalProperties": false}}])");

class HttpMessages : public ::testing::Test {
 protected:
  // The tools' description makes prompts of ~650 byte-level tokens: a longer context than the
  // default tiny model's.
  static void SetUpTestSuite() {
    TinyModelSpec spec = tiny_spec_for_server();
    spec.context_len = 2048;
    model_ = load_tiny_model(spec, "http_messages");
    h_ = new HttpHarness(*model_, test_engine_options(8 << 20));
  }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
    model_.reset();
  }
  static json request(int max_tokens = 12) {
    return {{"model", "test-model"},
            {"max_tokens", max_tokens},
            {"system", "You are terse."},
            {"messages", {{{"role", "user"}, {"content", "Say hello"}}}},
            {"temperature", 0}};
  }
  static std::unique_ptr<Model> model_;
  static HttpHarness* h_;
};
std::unique_ptr<Model> HttpMessages::model_;
HttpHarness* HttpMessages::h_ = nullptr;

void expect_anthropic_error(const Reply& r, int status, const char* type, const std::string& words = "") {
  EXPECT_EQ(r.status, status) << r.text;
  EXPECT_EQ(r.body["type"], "error") << r.text;
  EXPECT_EQ(r.body["error"]["type"], type) << r.text;
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find(words), std::string::npos) << r.text;
}

// A streamed answer's text: its text deltas joined.
std::string streamed_text(const std::vector<NamedEvent>& events) {
  std::string text;
  for (const NamedEvent& e : events) {
    if (e.name == "content_block_delta" && e.data["delta"]["type"] == "text_delta") text += e.data["delta"]["text"].get<std::string>();
  }
  return text;
}

TEST_F(HttpMessages, KeyFromXApiKeyOrBearer) {
  HttpOptions http = test_http_options();
  http.api_key = ApiKey("k3y");
  HttpHarness h(*model_, test_engine_options(), http);
  const json count = {{"model", "test-model"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  Reply r = post(h, "/v1/messages/count_tokens", count, {{"x-api-key", "k3y"}, {"anthropic-version", "2023-06-01"}});
  EXPECT_EQ(r.status, 200) << r.text;
  EXPECT_GT(r.body["input_tokens"].get<int>(), 0) << r.text;
  EXPECT_EQ(post(h, "/v1/messages/count_tokens", count, {{"Authorization", "Bearer k3y"}}).status, 200);
  r = post(h, "/v1/messages", request(2), {{"x-api-key", "k3y"}, {"anthropic-version", "2099-01-01"}});
  EXPECT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["type"], "message") << r.text;

  expect_anthropic_error(post(h, "/v1/messages", request(2), {{"x-api-key", "wrong"}}), 401, "authentication_error",
                         "x-api-key");
  expect_anthropic_error(post(h, "/v1/messages/count_tokens", count), 401, "authentication_error");
  // Only the Messages routes take x-api-key; the OpenAI ones keep their shape.
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
  r = post(h, "/v1/chat/completions", chat, {{"x-api-key", "k3y"}});
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body["error"]["code"], "invalid_api_key") << r.text;
}

TEST_F(HttpMessages, ErrorsAreAnthropicShaped) {
  json b = request();
  b["logprobs"] = true;
  expect_anthropic_error(post(*h_, "/v1/messages", b), 400, "invalid_request_error", "logprobs");
  b = request();
  b["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
  expect_anthropic_error(post(*h_, "/v1/messages", b), 400, "invalid_request_error", "'thinking'");
  expect_anthropic_error(post(*h_, "/v1/messages", std::string("{not json")), 400, "invalid_request_error", "JSON");
  b = request();
  b["model"] = "claude-elsewhere";
  expect_anthropic_error(post(*h_, "/v1/messages", b), 404, "not_found_error", "claude-elsewhere");
  b = request();
  b["max_tokens"] = 5000;  // more than the context window leaves
  expect_anthropic_error(post(*h_, "/v1/messages", b), 400, "invalid_request_error", "max_tokens");
  b["stream"] = true;  // refused before the stream starts: still a plain error answer
  expect_anthropic_error(post(*h_, "/v1/messages", b), 400, "invalid_request_error", "max_tokens");
  EXPECT_EQ(get(*h_, "/v1/messages").status, 405);
}

// count_tokens counts the prompt the request would have: the chat template over the same messages,
// and what the answer's usage adds up to.
TEST_F(HttpMessages, CountTokens) {
  json count = request();
  count.erase("max_tokens");
  count.erase("temperature");
  const Reply counted = post(*h_, "/v1/messages/count_tokens", count);
  ASSERT_EQ(counted.status, 200) << counted.text;
  const json tokenize = {{"messages", {{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", "Say hello"}}}}};
  EXPECT_EQ(counted.body["input_tokens"], post(*h_, "/tokenize", tokenize).body["count"]);
  const Reply answer = post(*h_, "/v1/messages", request());
  ASSERT_EQ(answer.status, 200) << answer.text;
  const json& usage = answer.body["usage"];
  EXPECT_EQ(usage["input_tokens"].get<int>() + usage["cache_read_input_tokens"].get<int>(), counted.body["input_tokens"]);
  EXPECT_EQ(usage["cache_creation_input_tokens"], 0);
  count["max_tokens"] = 5;  // a generation field: not part of counting
  expect_anthropic_error(post(*h_, "/v1/messages/count_tokens", count), 400, "invalid_request_error", "max_tokens");
}

TEST_F(HttpMessages, StreamEqualsWholeAnswer) {
  const Reply whole = post(*h_, "/v1/messages", request());
  ASSERT_EQ(whole.status, 200) << whole.text;
  json b = request();
  b["stream"] = true;
  const Reply streamed = post(*h_, "/v1/messages", b);
  ASSERT_EQ(streamed.status, 200) << streamed.text;
  EXPECT_EQ(streamed.content_type, "text/event-stream");
  const std::vector<NamedEvent> events = sse_named_events(streamed.text);
  ASSERT_GE(events.size(), 4u) << streamed.text;
  EXPECT_EQ(events.front().name, "message_start");
  EXPECT_EQ(events.back().name, "message_stop");
  const NamedEvent& delta = events[events.size() - 2];
  EXPECT_EQ(delta.name, "message_delta");
  EXPECT_EQ(delta.data["delta"]["stop_reason"], whole.body["stop_reason"]);
  EXPECT_EQ(delta.data["usage"]["output_tokens"], whole.body["usage"]["output_tokens"]);
  const std::string text = whole.body["content"].empty() ? "" : whole.body["content"][0]["text"].get<std::string>();
  EXPECT_EQ(streamed_text(events), text);
}

// tool_choice {type: tool}: whatever the random model would say, the answer is one tool_use block
// whose input follows the schema, streamed (input_json_delta) as whole.
TEST_F(HttpMessages, ForcedToolUse) {
  json b = request(200);
  b["tools"] = kTools;
  b["tool_choice"] = {{"type", "tool"}, {"name", "set_mode"}};
  b["temperature"] = 0.8;
  const Reply whole = post(*h_, "/v1/messages", b);
  ASSERT_EQ(whole.status, 200) << whole.text;
  EXPECT_EQ(whole.body["stop_reason"], "tool_use") << whole.text;
  ASSERT_EQ(whole.body["content"].size(), 1u) << whole.text;
  const json& block = whole.body["content"][0];
  EXPECT_EQ(block["type"], "tool_use");
  EXPECT_TRUE(block["id"].get<std::string>().starts_with("toolu_")) << block;
  EXPECT_EQ(block["name"], "set_mode");
  EXPECT_TRUE(block["input"]["mode"] == "fast" || block["input"]["mode"] == "slow") << block;
  EXPECT_TRUE(block["input"]["loud"].is_boolean()) << block;

  b["stream"] = true;
  b["temperature"] = 0;
  const Reply streamed = post(*h_, "/v1/messages", b);
  ASSERT_EQ(streamed.status, 200) << streamed.text;
  std::string partial_json;
  json stop_reason;
  for (const NamedEvent& e : sse_named_events(streamed.text)) {
    if (e.name == "content_block_start") EXPECT_EQ(e.data["content_block"]["type"], "tool_use") << e.data;
    if (e.name == "content_block_delta") partial_json += e.data["delta"]["partial_json"].get<std::string>();
    if (e.name == "message_delta") stop_reason = e.data["delta"]["stop_reason"];
  }
  const json input = json::parse(partial_json, nullptr, false);
  EXPECT_TRUE(input.is_object() && input.contains("mode")) << partial_json;
  EXPECT_EQ(stop_reason, "tool_use");
}

}  // namespace
}  // namespace flashserve::test
