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

RequestOutput abort_event(std::optional<RequestError> error) {
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

// The choice ends with finish_reason "abort", then an error event, then [DONE]: a plain SSE reader
// sees the end of the choice, an SDK raises the error, and the stream is well-formed to the end.
TEST(ResponseBuilder, ServerAbortEndsAStreamWithAFinalEventAndDone) {
  const GenerationRequest r = one_prompt(Endpoint::Chat, true);
  ResponseBuilder b(r, tiny_model().tokenizer(), "m", "fp_test");
  EXPECT_EQ(sse_events(b.add({{0, token_event('a', -0.1f, 1, "a")}})).size(), 2u);  // the role chunk first
  const std::vector<json> last =
      sse_events(b.add({{0, abort_event(RequestError{ErrorKind::Internal, "internal error: boom"})}}));
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0]["choices"][0]["finish_reason"], "abort");
  EXPECT_EQ(last[0]["system_fingerprint"], "fp_test");
  EXPECT_EQ(last[1]["error"]["message"], "internal error: boom");
  EXPECT_EQ(last[1]["error"]["type"], "server_error");
  ASSERT_TRUE(b.failure());
  EXPECT_EQ(b.finish(), "data: [DONE]\n\n");
}

TEST(ResponseBuilder, ShutdownEndsEveryUnfinishedChoice) {
  GenerationRequest r = one_prompt(Endpoint::Completions, true);
  r.n = 2;
  ResponseBuilder b(r, tiny_model().tokenizer(), "m", "fp");
  RequestOutput done = token_event('a', -0.1f, 1, "a");
  done.finish = FinishReason::Length;
  b.add({{0, done}});
  const std::vector<json> last = sse_events(b.fail_unfinished({ErrorKind::Unavailable, "the server is shutting down"}));
  ASSERT_EQ(last.size(), 2u);  // choice 1's abort chunk, then the error; choice 0 had finished
  EXPECT_EQ(last[0]["choices"][0]["index"], 1);
  EXPECT_EQ(last[0]["choices"][0]["finish_reason"], "abort");
  EXPECT_EQ(last[1]["error"]["code"], "service_unavailable");
}

TEST(ResponseBuilder, ServerAbortGivesANonStreamedErrorBody) {
  const GenerationRequest r = one_prompt(Endpoint::Completions, false);
  ResponseBuilder b(r, tiny_model().tokenizer(), "m", "fp");
  EXPECT_EQ(b.add({{0, token_event('a', -0.1f, 1, "a")}, {0, abort_event(std::nullopt)}}), "");
  const json body = json::parse(b.finish());
  EXPECT_EQ(body["error"]["message"], "the request was aborted by the server");
  EXPECT_FALSE(body.contains("choices"));
  EXPECT_EQ(api_error(*b.failure()).status, 500);
}

TEST(ResponseBuilder, UsageCountsCachedPromptTokens) {
  const GenerationRequest r = one_prompt(Endpoint::Chat, false);
  ResponseBuilder b(r, tiny_model().tokenizer(), "m", "fp_x");
  RequestOutput o = token_event('a', -0.1f, 1, "a");
  o.finish = FinishReason::Stop;
  o.num_cached_tokens = 2;
  b.add({{0, o}});
  const json body = json::parse(b.finish());
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_EQ(body["system_fingerprint"], "fp_x");
}

TEST(ResponseBuilder, PartialUtf8TokensInLogprobs) {
  // U+2192 (→) is E2 86 92: three byte tokens in the tiny vocabulary, none valid UTF-8 alone.
  GenerationRequest r = one_prompt(Endpoint::Completions, false);
  r.logprobs = true;
  ResponseBuilder completions(r, tiny_model().tokenizer(), "m", "fp");
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
  ResponseBuilder chat(r, tiny_model().tokenizer(), "m", "fp");
  chat.add({{0, token_event(0xE2, -0.1f, 1)}, {0, last}});
  const json content = json::parse(chat.finish())["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["bytes"], json({0xE2}));
  EXPECT_EQ(content[0]["token"], "bytes:\\xe2");
  EXPECT_EQ(content[0]["top_logprobs"][0]["bytes"], json({0xE2}));
}

}  // namespace
}  // namespace flashserve::test
