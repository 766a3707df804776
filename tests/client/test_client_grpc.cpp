// The gRPC backend: per-message timing on hand-made messages, status codes as error names, then
// a real run against `flashserve serve` with the tiny model.
#include <gtest/gtest.h>

#include "client/grpc_backend.h"
#include "client/runner.h"
#include "tests/util/server_process.h"

namespace fb = flashserve::bench;
namespace pb = flashserve::v1;

namespace {

pb::GenerateStreamResponse message(const std::string& text, int tokens) {
  pb::GenerateStreamResponse m;
  m.set_text(text);
  for (int i = 0; i < tokens; ++i) m.add_tokens()->set_token_id(i);
  return m;
}

}  // namespace

TEST(GrpcStreamRecorder, TimesNonEmptyMessagesAndReadsUsage) {
  fb::GrpcStreamRecorder rec;
  rec.on_message(message("", 1), 0.05);  // an incomplete character: not the first token a user sees
  rec.on_message(message(" the", 1), 0.1);
  rec.on_message(message(" cat", 1), 0.2);
  pb::GenerateStreamResponse last = message(" sat", 1);
  last.mutable_usage()->set_completion_tokens(4);
  last.set_finish_reason(pb::FINISH_REASON_LENGTH);
  rec.on_message(last, 0.35);
  const fb::RequestResult r = rec.finish(grpc::Status::OK, 0.4);
  ASSERT_TRUE(r.ok()) << r.error_detail;
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.1);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[1], 0.15, 1e-12);
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_DOUBLE_EQ(r.e2e_s, 0.4);
}

TEST(GrpcStreamRecorder, FailedStatusIsNamedByItsCode) {
  fb::GrpcStreamRecorder rec;
  rec.on_message(message("a", 1), 0.1);
  const fb::RequestResult r = rec.finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full"), 0.2);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error_name, "RESOURCE_EXHAUSTED");
  EXPECT_EQ(r.error_detail, "RESOURCE_EXHAUSTED: queue full");
  EXPECT_EQ(r.output_tokens, 1) << "token count without a usage";
  const fb::Report report = fb::make_report({r}, 1.0, {});
  EXPECT_EQ(report.errors.at("RESOURCE_EXHAUSTED"), 1);

  fb::GrpcStreamRecorder empty;
  EXPECT_EQ(empty.finish(grpc::Status::OK, 0.1).error, fb::ErrorKind::Stream);
}

TEST(GrpcBackend, NobodyListeningIsUnavailable) {
  fb::GrpcBackend backend({"127.0.0.1:" + std::to_string(flashserve::test::free_port()), 5});
  const fb::RequestResult r = backend.send({.prompt = "hi", .input_len = 1, .output_len = 2});
  EXPECT_EQ(r.error, fb::ErrorKind::Connect);
  EXPECT_EQ(r.error_name, "UNAVAILABLE");
}

TEST(GrpcBackendIntegration, SixRequestsAgainstTheTinyModel) {
  flashserve::test::ServerProcess server(flashserve::test::tiny_model_for_server());
  fb::GrpcBackend backend({server.grpc_address(), 120});
  const auto requests = fb::make_synthetic_workload({.num_requests = 6, .input_len = 16, .output_len = 8, .seed = 2});
  const fb::RunResult run = fb::run_benchmark(backend, requests, {});
  ASSERT_EQ(run.results.size(), 6u);
  for (const fb::RequestResult& r : run.results) {
    ASSERT_TRUE(r.ok()) << r.error_detail << "\n" << server.log();
    EXPECT_GT(r.ttft_s, 0.0);
    EXPECT_GE(r.e2e_s, r.ttft_s);
  }
  const fb::Report report = fb::make_report(run.results, run.duration_s, {});
  EXPECT_EQ(report.num_ok, 6);
  EXPECT_EQ(report.total_output_tokens, 6 * 8);
  EXPECT_EQ(report.total_input_len, 6 * 16);
  EXPECT_GT(report.output_throughput, 0.0);
}
