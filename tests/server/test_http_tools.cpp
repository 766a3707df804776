// Tool calling over HTTP on the tiny random model: whatever it would say, a forced call comes back
// as `tool_calls` whose arguments validate, streamed as OpenAI streams them and the same as the
// whole answer; tool results go back into the conversation.
#include <gtest/gtest.h>

#include "tests/server/http_harness.h"
#include "tests/util/server_process.h"

namespace flashserve::test {
namespace {

// Enum and boolean parameters only: a random model cannot wander off into an endless string.
const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "set_mode", "parameters": {"type": "object",
    "properties": {"mode": {"enum": ["fast", "slow"]}, "loud": {"type": "boolean"}},
    "required": ["mode", "loud"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "reset"}}])");

class HttpTools : public ::testing::Test {
 protected:
  // The tools' description makes prompts of ~650 byte-level tokens: a longer context than the
  // default tiny model's.
  static void SetUpTestSuite() {
    TinyModelSpec spec = tiny_spec_for_server();
    spec.context_len = 2048;
    model_ = load_tiny_model(spec, "tools");
    h_ = new HttpHarness(*model_, test_engine_options(8 << 20));
  }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
    model_.reset();
  }
  static json request(json tool_choice, int max_tokens = 400) {
    return {{"messages", {{{"role", "user"}, {"content", "switch to fast mode"}}}},
            {"tools", kTools},
            {"tool_choice", std::move(tool_choice)},
            {"max_tokens", max_tokens},
            {"temperature", 0.8},
            {"seed", 11}};
  }
  static std::unique_ptr<Model> model_;
  static HttpHarness* h_;
};
std::unique_ptr<Model> HttpTools::model_;
HttpHarness* HttpTools::h_ = nullptr;

const json kSetMode = {{"type", "function"}, {"function", {{"name", "set_mode"}}}};

void expect_valid_set_mode(const json& call) {
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_")) << call;
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "set_mode");
  const json args = json::parse(call["function"]["arguments"].get<std::string>());
  ASSERT_TRUE(args.is_object()) << call;
  EXPECT_EQ(args.size(), 2u) << args;
  EXPECT_TRUE(args["mode"] == "fast" || args["mode"] == "slow") << args;
  EXPECT_TRUE(args["loud"].is_boolean()) << args;
}

TEST_F(HttpTools, NamedFunctionIsCalled) {
  for (uint64_t seed = 0; seed < 5; ++seed) {
    json body = request(kSetMode);
    body["seed"] = seed;
    const Reply r = post(*h_, "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.text;
    const json& choice = r.body["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.text;
    EXPECT_TRUE(choice["message"]["content"].is_null()) << r.text;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.text;
    expect_valid_set_mode(choice["message"]["tool_calls"][0]);
  }
}

// The calls assembled from the deltas, per choice: {name, arguments} in call order.
std::vector<json> assemble(const std::vector<json>& events, int choice, std::string& finish) {
  std::vector<json> calls;
  for (const json& e : events) {
    if (!e.is_object() || e["choices"].empty() || e["choices"][0]["index"] != choice) continue;
    const json& c = e["choices"][0];
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
    if (!c["delta"].contains("tool_calls")) continue;
    EXPECT_EQ(c["delta"]["tool_calls"].size(), 1u);
    const json& d = c["delta"]["tool_calls"][0];
    if (d.contains("id")) {
      EXPECT_EQ(d["index"], calls.size());
      EXPECT_EQ(d["type"], "function");
      calls.push_back({{"id", d["id"]}, {"type", "function"}, {"function", {{"name", d["function"]["name"]}, {"arguments", ""}}}});
    } else {
      EXPECT_EQ(d["index"], calls.size() - 1);
      EXPECT_FALSE(d["function"].contains("name"));
    }
    calls.back()["function"]["arguments"] =
        calls.back()["function"]["arguments"].get<std::string>() + d["function"]["arguments"].get<std::string>();
  }
  return calls;
}

// A choice's content as the OpenAI SDK assembles it from the deltas (stream().get_final_completion()):
// null until a string arrives, strings joined.
json assemble_content(const std::vector<json>& events, int choice) {
  json content;
  for (const json& e : events) {
    if (!e.is_object() || e["choices"].empty() || e["choices"][0]["index"] != choice) continue;
    const json& d = e["choices"][0]["delta"];
    if (!d.contains("content") || d["content"].is_null()) continue;
    content = content.is_null() ? d["content"] : json(content.get<std::string>() + d["content"].get<std::string>());
  }
  return content;
}

// The same request answered whole, then streamed (its events).
std::pair<Reply, std::vector<json>> whole_and_streamed(const HttpHarness& h, json body) {
  const Reply whole = post(h, "/v1/chat/completions", body);
  EXPECT_EQ(whole.status, 200) << whole.text;
  body["stream"] = true;
  const Reply streamed = post(h, "/v1/chat/completions", body);
  EXPECT_EQ(streamed.status, 200) << streamed.text;
  return {whole, sse_events(streamed.text)};
}

TEST_F(HttpTools, StreamedCallsMatchTheWholeAnswer) {
  json body = request("required", 400);
  body["n"] = 2;
  const auto [whole, events] = whole_and_streamed(*h_, body);
  const std::string streamed_text = json(events).dump();
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    std::string finish;
    std::vector<json> calls = assemble(events, i, finish);
    const json& choice = whole.body["choices"][i];
    EXPECT_EQ(finish, choice["finish_reason"]);
    EXPECT_EQ(assemble_content(events, i), choice["message"]["content"]) << streamed_text;
    ASSERT_EQ(calls.size(), choice["message"]["tool_calls"].size()) << whole.text << "\n" << streamed_text;
    ASSERT_FALSE(calls.empty());
    for (size_t k = 0; k < calls.size(); ++k) {
      // Same seed, same calls; only the ids are new.
      EXPECT_EQ(calls[k]["function"], choice["message"]["tool_calls"][k]["function"]);
      if (finish == "tool_calls") {
        EXPECT_NO_THROW(json::parse(calls[k]["function"]["arguments"].get<std::string>()));
      }
    }
  }
}

TEST_F(HttpTools, NoParallelCallsMeansOne) {
  for (uint64_t seed = 0; seed < 4; ++seed) {
    json body = request("required", 400);
    body["parallel_tool_calls"] = false;
    body["seed"] = seed;
    const Reply r = post(*h_, "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["choices"][0]["message"]["tool_calls"].size(), 1u) << r.text;
  }
}

TEST_F(HttpTools, NoneAndAutoAnswerWithoutForcing) {
  for (const char* choice : {"none", "auto"}) {
    const Reply r = post(*h_, "/v1/chat/completions", request(choice, 8));
    ASSERT_EQ(r.status, 200) << r.text;
    const json& message = r.body["choices"][0]["message"];
    // The random model writes no well-formed call: its text comes back as content.
    EXPECT_TRUE(message["content"].is_string()) << r.text;
    EXPECT_FALSE(message.contains("tool_calls")) << r.text;
  }
}

// With tools offered ("auto"), the stream's content starts null (as OpenAI streams a call), and an
// answer without calls still assembles to the whole answer's text; "none" offers no tools.
TEST_F(HttpTools, StreamedContentMatchesTheWholeAnswer) {
  for (const char* choice : {"none", "auto"}) {
    SCOPED_TRACE(choice);
    const auto [whole, events] = whole_and_streamed(*h_, request(choice, 8));
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events[0]["choices"][0]["delta"]["content"], choice == std::string("auto") ? json(nullptr) : json(""))
        << json(events).dump();
    EXPECT_EQ(assemble_content(events, 0), whole.body["choices"][0]["message"]["content"]) << json(events).dump();
  }
}

TEST_F(HttpTools, ToolResultsGoBackIntoTheConversation) {
  const Reply first = post(*h_, "/v1/chat/completions", request(kSetMode));
  ASSERT_EQ(first.status, 200) << first.text;
  json messages = request(kSetMode)["messages"];
  json assistant = first.body["choices"][0]["message"];
  messages.push_back(assistant);
  messages.push_back({{"role", "tool"}, {"tool_call_id", assistant["tool_calls"][0]["id"]}, {"content", "done"}});
  json body = request("auto", 6);
  body["messages"] = messages;
  const Reply second = post(*h_, "/v1/chat/completions", body);
  ASSERT_EQ(second.status, 200) << second.text;
  // The call and its result are in the prompt: it is longer than the question alone.
  EXPECT_GT(second.body["usage"]["prompt_tokens"].get<int>(), first.body["usage"]["prompt_tokens"].get<int>() + 10);
}

TEST_F(HttpTools, MisuseIsA400NamingTheField) {
  auto refused = [&](const json& body, const std::string& param) {
    const Reply r = post(*h_, "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 400) << body.dump() << "\n" << r.text;
    EXPECT_EQ(r.body["error"]["param"], param) << r.text;
  };
  json b = request("required");
  b["response_format"] = {{"type", "json_object"}};
  refused(b, "response_format");
  b = request("auto");
  b["messages"].push_back({{"role", "tool"}, {"content", "no id"}});
  refused(b, "messages");
  b = request("auto");
  b["messages"].push_back({{"role", "assistant"}, {"tool_calls", {{{"id", "x"}, {"function", {{"name", "reset"}}}}}}});
  refused(b, "messages");
  b = request("required");
  b["tools"].push_back({{"type", "function"}, {"function", {{"name", "odd"}, {"parameters", {{"not", json::object()}}}}}});
  refused(b, "tools");
  b = request("auto");
  b["parallel_tool_calls"] = false;
  b["stop"] = {"a", "b", "c", "d"};
  refused(b, "stop");
  EXPECT_TRUE(all_blocks_free(h_->serving));
}

}  // namespace
}  // namespace flashserve::test
