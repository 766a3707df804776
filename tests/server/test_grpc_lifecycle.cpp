// The gRPC API in process, on the real SmolLM2: chat, and the life of a call that does not finish
// by itself (deadline, client cancellation, overload, server stop). The real model makes at most a
// few hundred tokens per second on a CPU, so a 1000-token request is still running when the call
// ends; that the call then cancelled it shows as FinishReason::Abort, however slow the machine.
#include <gtest/gtest.h>

#include "tests/server/grpc_harness.h"
#include "tests/util/test_paths.h"

namespace flashserve::test {
namespace {

using namespace std::chrono_literals;

class GrpcLifecycleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(real_model_path()).release(); }
  static void TearDownTestSuite() { delete model_; }

  static pb::GenerateRequest long_request() {
    pb::GenerateRequest req = text_request("Count from one to one thousand:", 1000);
    req.mutable_stopping()->set_ignore_eos(true);
    return req;
  }

  static Model* model_;
};
Model* GrpcLifecycleTest::model_ = nullptr;

// Reads `n` messages from a stream that must still be going.
void read_messages(grpc::ClientReader<pb::GenerateStreamResponse>& reader, int n) {
  pb::GenerateStreamResponse msg;
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(reader.Read(&msg));
    ASSERT_EQ(msg.finish_reason(), pb::FINISH_REASON_UNSPECIFIED);
  }
}

TEST_F(GrpcLifecycleTest, GreedyChatAnswers) {
  // The exact path: with 8-bit activations (the default) this greedy answer is llama.cpp's, which
  // quantizes activations too: "L'Étoile, la Marseillaise, ..." (HttpRealModel.ChatAnswersInWords).
  EngineOptions options = small_engine_options();
  options.cpu_activations = "f32";
  GrpcHarness h(*model_, options);
  pb::GenerateRequest req;
  auto* m = req.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content("What is the capital of France?");
  req.mutable_sampling()->set_temperature(0);
  req.mutable_stopping()->set_max_tokens(24);
  grpc::ClientContext ctx;
  pb::GenerateResponse resp;
  const grpc::Status s = h.stub->Generate(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(resp.text().empty());
  EXPECT_NE(resp.text().find("Paris"), std::string::npos) << resp.text();
  EXPECT_NE(resp.finish_reason(), pb::FINISH_REASON_UNSPECIFIED);
  EXPECT_EQ(resp.usage().completion_tokens(), resp.tokens_size());
}

TEST_F(GrpcLifecycleTest, DeadlineExceededCancelsTheRequest) {
  GrpcHarness h(*model_);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 300ms);
    pb::GenerateResponse resp;
    EXPECT_EQ(h.stub->Generate(&ctx, long_request(), &resp).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  EXPECT_TRUE(engine_idle(h.serving));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 300ms);
    auto reader = h.stub->GenerateStream(&ctx, long_request());
    for (pb::GenerateStreamResponse msg; reader->Read(&msg);) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  EXPECT_TRUE(engine_idle(h.serving));
  EXPECT_EQ(h.recorder.finishes(), std::vector<FinishReason>(2, FinishReason::Abort));
}

TEST_F(GrpcLifecycleTest, ClientCancellationMidStreamFreesBlocks) {
  GrpcHarness h(*model_);
  grpc::ClientContext ctx;
  auto reader = h.stub->GenerateStream(&ctx, long_request());
  read_messages(*reader, 3);
  EXPECT_GT(h.serving.stats().num_running, 0);
  ctx.TryCancel();
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(engine_idle(h.serving));
  EXPECT_EQ(h.recorder.finishes(), std::vector<FinishReason>{FinishReason::Abort});
}

TEST_F(GrpcLifecycleTest, FullWaitingQueueIsResourceExhausted) {
  EngineOptions options = small_engine_options();
  options.max_num_seqs = 1;
  options.max_waiting = 1;
  GrpcHarness h(*model_, options);
  grpc::ClientContext running_ctx, waiting_ctx;
  auto running = h.stub->GenerateStream(&running_ctx, long_request());
  read_messages(*running, 1);
  auto waiting = h.stub->GenerateStream(&waiting_ctx, long_request());
  const auto until = Clock::now() + 10s;
  while (h.serving.stats().num_waiting == 0 && Clock::now() < until) std::this_thread::sleep_for(5ms);
  ASSERT_EQ(h.serving.stats().num_waiting, 1);

  grpc::ClientContext ctx;
  pb::GenerateResponse resp;
  const grpc::Status refused = h.stub->Generate(&ctx, long_request(), &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();

  // Cancelling a request that never ran takes it out of the queue too.
  waiting_ctx.TryCancel();
  running_ctx.TryCancel();
  EXPECT_EQ(waiting->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(running->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(engine_idle(h.serving));
  EXPECT_EQ(h.recorder.finishes(), std::vector<FinishReason>(2, FinishReason::Abort));
}

TEST_F(GrpcLifecycleTest, StopCancelsCallsStillRunningAtTheDeadline) {
  GrpcHarness h(*model_);
  grpc::ClientContext ctx;
  auto reader = h.stub->GenerateStream(&ctx, long_request());
  read_messages(*reader, 1);
  const auto start = Clock::now();
  h.server.stop(start + 300ms);
  EXPECT_GE(Clock::now() - start, 250ms);
  EXPECT_LT(Clock::now() - start, 10s);
  for (pb::GenerateStreamResponse msg; reader->Read(&msg);) {
  }
  EXPECT_FALSE(reader->Finish().ok());
  EXPECT_TRUE(engine_idle(h.serving));
  EXPECT_EQ(h.recorder.finishes(), std::vector<FinishReason>{FinishReason::Abort});
}

}  // namespace
}  // namespace flashserve::test
