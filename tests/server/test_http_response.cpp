// ResponseBuilder without HTTP: what a client sees when the server aborts a request, and how
// logprobs spell tokens that are only part of a UTF-8 character.
#include <gtest/gtest.h>

#include "server/openai_response.h"
#include "tests/server/http_harness.h"

namespace flashserve::test {
namespace {

RequestOutput token_event(int32_t token, float logprob, int32_t num_output_tokens, std::string text = "") {
  RequestOutput o;
  o.tokens.push_back({token, logprob, {{token, logprob}}});
  o.text = std::move(text);
  o.num_output_tokens = num_output_tokens;
  return o;
}

RequestOutput abort_event(std::string error) {
  RequestOutput o;
  o.finish = FinishReason::Abort;
  o.error = std::move(error);
  return o;
}

GenerationRequest one_prompt(Endpoint endpoint, bool stream) {
  GenerationRequest r;
  r.endpoint = endpoint;
  r.prompts = {{1, 2, 3}};
  r.stream = stream;
  return r;
}

TEST(ResponseBuilder, ServerAbortEndsAStreamWithAnErrorEvent) {
  const GenerationRequest r = one_prompt(Endpoint::Chat, true);
  ResponseBuilder b(r, tiny_model().tokenizer(), "m");
  EXPECT_EQ(sse_events(b.start()).size(), 1u);
  EXPECT_EQ(sse_events(b.add({{0, token_event('a', -0.1f, 1, "a")}})).size(), 1u);
  const std::vector<json> error = sse_events(b.add({{0, abort_event("internal error: boom")}}));
  ASSERT_EQ(error.size(), 1u);
  EXPECT_EQ(error[0]["error"]["message"], "internal error: boom");
  EXPECT_EQ(error[0]["error"]["type"], "server_error");
  EXPECT_TRUE(b.failed());
  EXPECT_EQ(b.finish(), "data: [DONE]\n\n");
}

TEST(ResponseBuilder, ServerAbortGivesANonStreamedErrorBody) {
  const GenerationRequest r = one_prompt(Endpoint::Completions, false);
  ResponseBuilder b(r, tiny_model().tokenizer(), "m");
  EXPECT_EQ(b.add({{0, token_event('a', -0.1f, 1, "a")}, {0, abort_event("")}}), "");
  const json body = json::parse(b.finish());
  EXPECT_EQ(body["error"]["message"], "the request was aborted by the server");
  EXPECT_FALSE(body.contains("choices"));
}

TEST(ResponseBuilder, PartialUtf8TokensInLogprobs) {
  // U+2192 (→) is E2 86 92: three byte tokens in the tiny vocabulary, none valid UTF-8 alone.
  GenerationRequest r = one_prompt(Endpoint::Completions, false);
  r.logprobs = true;
  ResponseBuilder completions(r, tiny_model().tokenizer(), "m");
  RequestOutput last = token_event(0x92, -0.3f, 3, "\xE2\x86\x92");
  last.finish = FinishReason::Length;
  completions.add({{0, token_event(0xE2, -0.1f, 1)}, {0, token_event(0x86, -0.2f, 2)}, {0, last}});
  const json body = json::parse(completions.finish());
  const json& lp = body["choices"][0]["logprobs"];
  EXPECT_EQ(body["choices"][0]["text"], "\xE2\x86\x92");
  EXPECT_EQ(lp["tokens"], json({"bytes:\\xe2", "bytes:\\x86", "bytes:\\x92"}));
  EXPECT_EQ(lp["text_offset"], json({0, 1, 2}));
  EXPECT_TRUE(lp["top_logprobs"][0].contains("bytes:\\xe2"));

  r.endpoint = Endpoint::Chat;
  ResponseBuilder chat(r, tiny_model().tokenizer(), "m");
  chat.add({{0, token_event(0xE2, -0.1f, 1)}, {0, last}});
  const json content = json::parse(chat.finish())["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["bytes"], json({0xE2}));
  EXPECT_EQ(content[0]["token"], "bytes:\\xe2");
  EXPECT_EQ(content[0]["top_logprobs"][0]["bytes"], json({0xE2}));
}

}  // namespace
}  // namespace flashserve::test
