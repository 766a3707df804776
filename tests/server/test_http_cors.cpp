// Browser apps calling the API from another origin (CORS, server/cors.h): off by default; with
// --allowed-origins the preflight is answered without the API key and every answer to an allowed
// origin, streamed or not, error or not, carries Access-Control-Allow-Origin.
#include <gtest/gtest.h>

#include "server/cors.h"
#include "tests/server/http_harness.h"

namespace flashserve::test {
namespace {

const json kChat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}};
const char* kApp = "https://app.example";

httplib::Result preflight(const HttpHarness& h, const std::string& origin) {
  auto c = h.client();
  return c.Options("/v1/chat/completions", {{"Origin", origin},
                                           {"Access-Control-Request-Method", "POST"},
                                           {"Access-Control-Request-Headers", "authorization, content-type"}});
}

TEST(CorsPolicy, AllowsOnlyWhatItWasGiven) {
  const CorsPolicy off({});
  EXPECT_FALSE(off.enabled());
  EXPECT_TRUE(off.answer_headers(kApp).empty());
  const CorsPolicy listed({kApp, "http://localhost:3000"});
  EXPECT_TRUE(listed.allows(kApp));
  EXPECT_TRUE(listed.allows("http://localhost:3000"));
  EXPECT_FALSE(listed.allows("https://app.example.evil"));
  EXPECT_FALSE(listed.allows(""));
  EXPECT_EQ(listed.answer_headers(kApp), (HeaderList{{"Access-Control-Allow-Origin", kApp}, {"Vary", "Origin"}}));
  const CorsPolicy any({"*"});
  EXPECT_TRUE(any.allows("https://anything.example"));
  EXPECT_FALSE(any.allows("")) << "a request with no Origin is not a cross-origin one";
}

TEST(HttpCors, OffByDefault) {
  HttpHarness h(tiny_model());
  auto r = preflight(h, kApp);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  const auto answer = h.client().Post("/v1/chat/completions", {{"Origin", kApp}}, kChat.dump(), "application/json");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
  EXPECT_FALSE(answer->has_header("Access-Control-Allow-Origin"));
}

class HttpCorsOn : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    HttpOptions http = test_http_options();
    http.api_key = ApiKey("s3cret-key");
    http.allowed_origins = {kApp};
    h_ = new HttpHarness(tiny_model(), test_engine_options(), http);
  }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
  }
  static HttpHarness* h_;
  const httplib::Headers from_app_ = {{"Origin", kApp}, {"Authorization", "Bearer s3cret-key"}};
};
HttpHarness* HttpCorsOn::h_ = nullptr;

TEST_F(HttpCorsOn, PreflightIsAnsweredWithoutTheKey) {
  auto r = preflight(*h_, kApp);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), kApp);
  EXPECT_EQ(r->get_header_value_count("Access-Control-Allow-Origin"), 1u) << "browsers refuse two";
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
  EXPECT_NE(r->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  auto other = preflight(*h_, "https://elsewhere.example");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 403);
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
}

TEST_F(HttpCorsOn, EveryAnswerToAnAllowedOriginSaysSo) {
  auto c = h_->client();
  json stream = kChat;
  stream["stream"] = true;
  json bad = kChat;
  bad["temperature"] = 9;
  const std::vector<std::pair<std::string, httplib::Result>> answers = [&] {
    std::vector<std::pair<std::string, httplib::Result>> a;
    a.emplace_back("chat", c.Post("/v1/chat/completions", from_app_, kChat.dump(), "application/json"));
    a.emplace_back("stream", c.Post("/v1/chat/completions", from_app_, stream.dump(), "application/json"));
    a.emplace_back("400", c.Post("/v1/chat/completions", from_app_, bad.dump(), "application/json"));
    a.emplace_back("models", c.Get("/v1/models", from_app_));
    a.emplace_back("401", c.Get("/v1/models", {{"Origin", kApp}}));
    a.emplace_back("health", c.Get("/health", {{"Origin", kApp}}));
    return a;
  }();
  for (const auto& [what, r] : answers) {
    SCOPED_TRACE(what);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), kApp) << r->status << " " << r->body;
    EXPECT_EQ(r->get_header_value_count("Access-Control-Allow-Origin"), 1u);
  }
  EXPECT_EQ(answers[0].second->status, 200);
  EXPECT_EQ(answers[1].second->status, 200);
  EXPECT_EQ(answers[2].second->status, 400);
  EXPECT_EQ(answers[4].second->status, 401) << "the key is still required on the API itself";
  const auto elsewhere = c.Post("/v1/chat/completions", {{"Origin", "https://elsewhere.example"},
                                                          {"Authorization", "Bearer s3cret-key"}},
                                kChat.dump(), "application/json");
  ASSERT_TRUE(elsewhere);
  EXPECT_FALSE(elsewhere->has_header("Access-Control-Allow-Origin"));
}

}  // namespace
}  // namespace flashserve::test
