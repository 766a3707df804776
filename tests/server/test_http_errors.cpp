// How the HTTP API refuses: OpenAI error JSON with the right status for malformed or mistyped
// requests, unknown models and routes, oversize bodies, missing API keys, prompts too long and a
// draining server.
#include <gtest/gtest.h>

#include "tests/server/http_harness.h"

namespace flashserve::test {
namespace {

// {"error": {"message", "type", "param", "code"}} with a message worth reading.
void expect_error(const Reply& r, int status, const std::string& type = "invalid_request_error") {
  EXPECT_EQ(r.status, status) << r.text;
  ASSERT_TRUE(r.body.is_object()) << r.text;
  ASSERT_TRUE(r.body.contains("error")) << r.text;
  const json& e = r.body["error"];
  EXPECT_FALSE(e["message"].get<std::string>().empty());
  EXPECT_EQ(e["type"], type);
  EXPECT_TRUE(e.contains("param"));
  EXPECT_TRUE(e.contains("code"));
  EXPECT_EQ(r.content_type, "application/json");
}

class HttpErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    HttpOptions http = test_http_options();
    http.max_body_bytes = 4096;
    h_ = new HttpHarness(tiny_model(), test_engine_options(), http);
  }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
  }
  static HttpHarness* h_;
};
HttpHarness* HttpErrors::h_ = nullptr;

const json kChat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
const json kCompletion = {{"prompt", "hi"}, {"max_tokens", 2}};

TEST_F(HttpErrors, MalformedJson) {
  expect_error(post(*h_, "/v1/completions", std::string("{\"prompt\": \"hi\",")), 400);
  expect_error(post(*h_, "/v1/chat/completions", std::string("not json")), 400);
  expect_error(post(*h_, "/v1/completions", std::string("[1, 2]")), 400);
  expect_error(post(*h_, "/tokenize", std::string("")), 400);
}

TEST_F(HttpErrors, WrongTypesNameTheField) {
  struct Case {
    const char* path;
    json base;
    const char* field;
    json value;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", kCompletion, "max_tokens", "ten"},
      {"/v1/completions", kCompletion, "temperature", "hot"},
      {"/v1/completions", kCompletion, "prompt", {{"text", "hi"}}},
      {"/v1/completions", kCompletion, "prompt", {1, "two"}},
      {"/v1/completions", kCompletion, "prompt", json::array()},
      {"/v1/completions", kCompletion, "n", 1.5},
      {"/v1/completions", kCompletion, "stream", "yes"},
      {"/v1/completions", kCompletion, "stop", 5},
      {"/v1/completions", kCompletion, "logit_bias", {{"abc", 1}}},
      {"/v1/completions", kCompletion, "logit_bias", {{" +42", 1}}},
      {"/v1/completions", kCompletion, "logit_bias", {{"42abc", 1}}},
      {"/v1/completions", kCompletion, "logprobs", true},
      {"/v1/completions", kCompletion, "seed", "1"},
      {"/v1/completions", kCompletion, "stream_options", 1},
      {"/v1/chat/completions", kChat, "messages", 5},
      {"/v1/chat/completions", kChat, "messages", json::array()},
      {"/v1/chat/completions", kChat, "messages", {{{"content", "no role"}}}},
      {"/v1/chat/completions", kChat, "messages", {{{"role", "user"}, {"content", 7}}}},
      {"/v1/chat/completions", kChat, "logprobs", 3},
      {"/v1/chat/completions", kChat, "model", 42},
      // Malformed constraints, whatever their shape (fuzzing found a non-string "type" raising a
      // JSON type error: a 500), and unimplemented fields asking for something.
      {"/v1/chat/completions", kChat, "response_format", {{"type", 1}}},
      {"/v1/chat/completions", kChat, "response_format", {{"type", nullptr}}},
      {"/v1/chat/completions", kChat, "response_format", {{"type", "xml"}}},
      {"/v1/chat/completions", kChat, "response_format", {{"type", "json_schema"}}},
      {"/v1/chat/completions", kChat, "response_format", {{"type", "json_object"}, {"schema", json::object()}}},
      {"/v1/chat/completions", kChat, "response_format",
       {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}, {"not", json::object()}}}}}}},
      {"/v1/completions", kCompletion, "response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}}}}},
      {"/v1/completions", kCompletion, "grammar", "root ::= x"},
      {"/v1/completions", kCompletion, "grammar", 5},
      {"/v1/completions", kCompletion, "regex", "a(?=b)"},
      {"/v1/completions", kCompletion, "regex", ""},
      {"/v1/chat/completions", kChat, "tools", {{{"type", "function"}}}},
      {"/v1/chat/completions", kChat, "tool_choice", "auto"},
      {"/v1/completions", kCompletion, "suffix", "x"},
      {"/v1/completions", kCompletion, "best_of", 2},
      {"/v1/completions", kCompletion, "frobnicate", 1},
      {"/v1/completions", kCompletion, "speculative", "eagle"},
      {"/v1/completions", kCompletion, "speculative", true},
      {"/v1/chat/completions", kChat, "num_speculative_tokens", 17},
      {"/v1/chat/completions", kChat, "num_speculative_tokens", -1},
      {"/v1/chat/completions", kChat, "num_speculative_tokens", "4"},
  };
  for (const Case& c : cases) {
    json body = c.base;
    body[c.field] = c.value;
    SCOPED_TRACE(std::string(c.path) + " " + body.dump());
    const Reply r = post(*h_, c.path, body);
    expect_error(r, 400);
    if (r.body.contains("error")) {
      EXPECT_EQ(r.body["error"]["param"], c.field);
    }
  }
}

TEST_F(HttpErrors, BadValues) {
  auto with = [](json body, const char* field, json value) {
    body[field] = std::move(value);
    return body;
  };
  expect_error(post(*h_, "/v1/completions", with(kCompletion, "n", 17)), 400);
  expect_error(post(*h_, "/v1/completions", with(kCompletion, "n", 0)), 400);
  expect_error(post(*h_, "/v1/completions", with(kCompletion, "temperature", -1)), 400);
  expect_error(post(*h_, "/v1/completions", with(kCompletion, "temperature", 2.5)), 400);  // OpenAI's [0, 2]
  expect_error(post(*h_, "/v1/chat/completions", with(kChat, "temperature", 5)), 400);
  expect_error(post(*h_, "/v1/completions", with(kCompletion, "top_p", 0)), 400);
  expect_error(post(*h_, "/v1/completions", with(kCompletion, "max_tokens", 0)), 400);
  expect_error(post(*h_, "/v1/completions", with(kCompletion, "logprobs", 21)), 400);
  expect_error(post(*h_, "/v1/completions", with(kCompletion, "prompt", {1, 2, 100000})), 400);
  expect_error(post(*h_, "/v1/completions", with(kCompletion, "prompt", "")), 400);
  expect_error(post(*h_, "/v1/completions", with(kCompletion, "echo", true)), 400);
  expect_error(post(*h_, "/v1/completions", json{{"max_tokens", 2}}), 400);
  expect_error(post(*h_, "/v1/chat/completions", json{{"max_tokens", 2}}), 400);
  expect_error(post(*h_, "/v1/chat/completions", with(kChat, "top_logprobs", 2)), 400);  // without logprobs
  expect_error(post(*h_, "/v1/chat/completions", with(kChat, "messages", {{{"role", "wizard"}, {"content", "x"}}})), 400);
  expect_error(post(*h_, "/v1/chat/completions",
                    with(kChat, "messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}})),
               400);
  EXPECT_TRUE(all_blocks_free(h_->serving));
}

// Current OpenAI fields that are labels or hints are accepted, checked for their shape; one that
// asks for what the server does not do is refused by name.
TEST_F(HttpErrors, CurrentOpenAiHintsAreAcceptedAndChecked) {
  json body = kChat;
  body["prompt_cache_key"] = "tenant-7";
  body["safety_identifier"] = "user-hash";
  body["metadata"] = {{"team", "search"}, {"run", "42"}};
  body["verbosity"] = "medium";
  body["temperature"] = 2;
  const Reply ok = post(*h_, "/v1/chat/completions", body);
  EXPECT_EQ(ok.status, 200) << ok.text;

  json many = json::object();
  for (int i = 0; i < 17; ++i) many["k" + std::to_string(i)] = "v";
  const std::vector<std::pair<const char*, json>> bad = {
      {"prompt_cache_key", 5},
      {"safety_identifier", json::array()},
      {"metadata", "x"},
      {"metadata", {{"n", 1}}},
      {"metadata", {{std::string(65, 'k'), "v"}}},
      {"metadata", {{"k", std::string(513, 'v')}}},
      {"metadata", many},
      {"verbosity", "low"},
  };
  for (const auto& [key, value] : bad) {
    json b = kChat;
    b[key] = value;
    SCOPED_TRACE(b.dump().substr(0, 200));
    const Reply r = post(*h_, "/v1/chat/completions", b);
    expect_error(r, 400);
    if (r.body.contains("error")) {
      EXPECT_EQ(r.body["error"]["param"], key);
    }
  }
}

TEST_F(HttpErrors, ContextTooLong) {
  const int32_t context = tiny_model().config().context_len;
  json body = kCompletion;
  body["max_tokens"] = context;  // prompt + max_tokens past the window
  Reply r = post(*h_, "/v1/completions", body);
  expect_error(r, 400);
  EXPECT_EQ(r.body["error"]["code"], "context_length_exceeded");
  body.erase("max_tokens");  // the default is whatever is left, but the prompt alone is too long
  body["prompt"] = std::vector<int32_t>(size_t(context) + 10, 'a');
  r = post(*h_, "/v1/completions", body);
  expect_error(r, 400);
  EXPECT_EQ(r.body["error"]["code"], "context_length_exceeded");
}

TEST_F(HttpErrors, UnknownModel) {
  json body = kChat;
  body["model"] = "gpt-4";
  const Reply r = post(*h_, "/v1/chat/completions", body);
  expect_error(r, 404);
  EXPECT_EQ(r.body["error"]["code"], "model_not_found");
  EXPECT_EQ(r.body["error"]["param"], "model");
  expect_error(post(*h_, "/tokenize", json{{"model", "gpt-4"}, {"prompt", "x"}}), 404);
}

TEST_F(HttpErrors, UnknownRouteAndWrongMethod) {
  expect_error(get(*h_, "/v1/engines"), 404);
  expect_error(post(*h_, "/v2/completions", kCompletion), 404);
  const Reply r = get(*h_, "/v1/completions");
  expect_error(r, 405);
  expect_error(post(*h_, "/v1/models", json::object()), 405);
}

TEST_F(HttpErrors, OversizeBody) {
  json body = kCompletion;
  body["prompt"] = std::string(8000, 'x');
  const Reply r = post(*h_, "/v1/completions", body);
  expect_error(r, 413);
  // The connection's next request is unaffected.
  EXPECT_EQ(post(*h_, "/v1/completions", kCompletion).status, 200);
}

TEST(HttpAuth, KeyRequiredOnTheApiOnly) {
  HttpOptions http = test_http_options();
  http.api_key = ApiKey("s3cret-key");
  HttpHarness h(tiny_model(), test_engine_options(), http);
  const httplib::Headers right = {{"Authorization", "Bearer s3cret-key"}};
  for (const httplib::Headers& wrong : std::vector<httplib::Headers>{
           {}, {{"Authorization", "Bearer s3cret-kez"}}, {{"Authorization", "Bearer s3cret-key2"}},
           {{"Authorization", "Bearer s3cret"}}, {{"Authorization", "s3cret-key"}}, {{"Authorization", "Bearer "}}}) {
    const Reply r = post(h, "/v1/completions", kCompletion, wrong);
    expect_error(r, 401);
    EXPECT_EQ(r.body["error"]["code"], "invalid_api_key");
    expect_error(post(h, "/v1/chat/completions", kChat, wrong), 401);
    expect_error(get(h, "/v1/models", wrong), 401);
    expect_error(post(h, "/tokenize", json{{"prompt", "x"}}, wrong), 401);
    expect_error(post(h, "/detokenize", json{{"tokens", {1}}}, wrong), 401);
  }
  EXPECT_EQ(post(h, "/v1/completions", kCompletion, right).status, 200);
  EXPECT_EQ(post(h, "/v1/chat/completions", kChat, right).status, 200);
  EXPECT_EQ(get(h, "/v1/models", right).status, 200);
  EXPECT_EQ(post(h, "/tokenize", json{{"prompt", "x"}}, right).status, 200);
  EXPECT_EQ(get(h, "/health").status, 200);
  EXPECT_EQ(get(h, "/ready").status, 200);
  EXPECT_EQ(get(h, "/metrics").status, 200);
}

TEST(HttpAuth, NoKeyConfiguredMeansOpen) {
  HttpHarness h(tiny_model());
  EXPECT_EQ(post(h, "/v1/completions", kCompletion).status, 200);
  EXPECT_EQ(post(h, "/v1/completions", kCompletion, {{"Authorization", "Bearer anything"}}).status, 200);
}

TEST(HttpDraining, RefusesWith503AndIsNotReady) {
  HttpHarness h(tiny_model());
  h.serving.start_draining();
  const Reply r = post(h, "/v1/completions", kCompletion);
  expect_error(r, 503, "server_error");
  const Reply ready = get(h, "/ready");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ready.body["status"], "not ready");
  EXPECT_EQ(get(h, "/health").status, 200);
}

TEST(HttpServerLifecycle, SecondServerOnATakenPortFailsToStart) {
  HttpHarness h(tiny_model());
  HttpOptions taken = test_http_options();
  taken.port = h.server.port();
  HttpServer second(h.serving, nullptr, taken);
  EXPECT_THROW(second.start(), std::runtime_error);
  EXPECT_EQ(get(h, "/health").status, 200);
}

}  // namespace
}  // namespace flashserve::test
