// The HTTP backend: SSE parsing and per-chunk timing on a captured stream, then a real run
// against `flashserve serve` with the tiny model.
#include <gtest/gtest.h>

#include "client/http_backend.h"
#include "client/runner.h"
#include "tests/util/server_process.h"

namespace fb = flashserve::bench;

namespace {

fb::HttpOptions loopback(int port, double timeout_s) {
  fb::HttpOptions o;
  o.port = port;
  o.timeout_s = timeout_s;
  return o;
}

// As server/openai_response.cpp streams a completion with include_usage (ids shortened).
const std::string kCapturedStream =
    R"(data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}],"usage":null})"
    "\n\n"
    R"(data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" cat","logprobs":null,"finish_reason":null}],"usage":null})"
    "\n\n"
    R"(data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" sat","logprobs":null,"finish_reason":"length"}],"usage":null})"
    "\n\n"
    R"(data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}})"
    "\n\n"
    "data: [DONE]\n\n";

std::vector<std::string> parse_in_pieces(const std::string& stream, size_t piece) {
  std::vector<std::string> events;
  fb::SseParser parser([&](std::string_view d) { events.emplace_back(d); });
  for (size_t i = 0; i < stream.size(); i += piece) parser.feed(std::string_view(stream).substr(i, piece));
  return events;
}

}  // namespace

TEST(SseParser, SameEventsWhateverTheChunking) {
  const auto whole = parse_in_pieces(kCapturedStream, kCapturedStream.size());
  ASSERT_EQ(whole.size(), 5u);
  EXPECT_EQ(whole.back(), "[DONE]");
  EXPECT_TRUE(whole[0].starts_with("{\"id\":\"cmpl-1\""));
  for (size_t piece : {1, 7, 64}) EXPECT_EQ(parse_in_pieces(kCapturedStream, piece), whole) << piece;
}

TEST(SseParser, CrlfMultiLineDataAndComments) {
  const auto events = parse_in_pieces(": keep-alive\r\ndata: a\r\ndata:b\r\nevent: x\r\n\r\ndata: c\n\n", 3);
  EXPECT_EQ(events, (std::vector<std::string>{"a\nb", "c"}));
}

TEST(CompletionStreamRecorder, TimesContentChunksAndReadsUsage) {
  fb::CompletionStreamRecorder rec;
  double t = 0.1;
  fb::SseParser parser([&](std::string_view d) {
    rec.on_event(d, t);
    t += 0.05;
  });
  parser.feed(kCapturedStream);
  const fb::RequestResult r = rec.finish(0.5);
  ASSERT_TRUE(r.ok()) << r.error_detail;
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.1);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[0], 0.05, 1e-12);
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_DOUBLE_EQ(r.e2e_s, 0.5);
}

TEST(CompletionStreamRecorder, WithoutUsageCountsChunks) {
  fb::CompletionStreamRecorder rec;
  rec.on_event(R"({"choices":[{"text":"a"}]})", 0.1);
  rec.on_event(R"({"choices":[{"text":""}]})", 0.2);  // no content: not a token boundary
  rec.on_event(R"({"choices":[{"text":"b"}]})", 0.3);
  rec.on_event("[DONE]", 0.3);
  const fb::RequestResult r = rec.finish(0.3);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.output_tokens, 2);
  EXPECT_NEAR(r.itl_s.at(0), 0.2, 1e-12);
}

TEST(CompletionStreamRecorder, ErrorEventsAndTruncatedStreamsFail) {
  fb::CompletionStreamRecorder with_error;
  with_error.on_event(R"({"error":{"message":"aborted","type":"server_error"}})", 0.1);
  with_error.on_event("[DONE]", 0.1);
  EXPECT_EQ(with_error.finish(0.1).error, fb::ErrorKind::Stream);

  fb::CompletionStreamRecorder truncated;
  truncated.on_event(R"({"choices":[{"text":"a"}]})", 0.1);
  EXPECT_EQ(truncated.finish(0.2).error, fb::ErrorKind::Stream);
}

TEST(HttpBackend, ConnectionRefusedIsAConnectError) {
  fb::HttpBackend backend(loopback(flashserve::test::free_port(), 5));
  const fb::RequestResult r = backend.send({.prompt = "hi", .input_len = 1, .output_len = 2});
  EXPECT_EQ(r.error, fb::ErrorKind::Connect);
}

TEST(HttpBackendIntegration, AllRequestsAtOnceAgainstTheTinyModel) {
  flashserve::test::ServerProcess server(flashserve::test::tiny_model_for_server());
  fb::HttpBackend backend(loopback(server.http_port(), 120));
  const auto requests = fb::make_synthetic_workload({.num_requests = 8, .input_len = 16, .output_len = 8, .seed = 1});
  const fb::RunResult run = fb::run_benchmark(backend, requests, {});
  ASSERT_EQ(run.results.size(), 8u);
  for (const fb::RequestResult& r : run.results) {
    ASSERT_TRUE(r.ok()) << fb::to_string(r.error) << ": " << r.error_detail << "\n" << server.log();
    EXPECT_GT(r.ttft_s, 0.0);
    EXPECT_GE(r.e2e_s, r.ttft_s);
  }
  const fb::Report report = fb::make_report(run.results, run.duration_s, {});
  EXPECT_EQ(report.num_ok, 8);
  EXPECT_EQ(report.total_output_tokens, 64);
  EXPECT_GT(report.ttft.median_ms, 0.0);
  EXPECT_GT(report.output_throughput, 0.0);
}

TEST(HttpBackendIntegration, ClosedLoopWithDurationEnds) {
  flashserve::test::ServerProcess server(flashserve::test::tiny_model_for_server());
  fb::HttpBackend backend(loopback(server.http_port(), 120));
  const auto requests = fb::make_synthetic_workload({.num_requests = 100000, .input_len = 8, .output_len = 4});
  const fb::RunResult run = fb::run_benchmark(backend, requests, {.concurrency = 2, .duration_s = 0.3});
  EXPECT_GT(run.results.size(), 0u);
  EXPECT_LT(run.results.size(), 100000u);
  for (const fb::RequestResult& r : run.results) EXPECT_TRUE(r.ok()) << r.error_detail;
}
