// The output thread: text and stop strings happen off the engine thread, a stop string cancels the
// engine request, and a consumer that blocks never holds up the engine.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "scheduler/output_processor.h"
#include "tests/util/engine_harness.h"
#include "tests/util/fake_runner.h"
#include "tests/util/tiny_model.h"

namespace flashserve {
namespace {

using namespace std::chrono_literals;

class OutputThread : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = test::tiny_tokenizer();
    runner_ = std::make_unique<test::FakeRunner>(test::kTinyVocab, 64, 16, 4096);
  }
  GenerateRequest request(const std::string& id, int32_t max_tokens) {
    return {id, {'h', 'e', 'l', 'l', 'o'}, test::greedy(max_tokens)};
  }
  // Waits until the engine has nothing running or queued and every block is free.
  static bool engine_idle(const Engine& engine, std::chrono::milliseconds timeout = 5000ms) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      const EngineStats s = engine.stats();
      if (s.num_running == 0 && s.num_waiting == 0 && s.num_free_kv_blocks == s.num_kv_blocks) return true;
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(1ms);
    }
  }
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<test::FakeRunner> runner_;
};

TEST_F(OutputThread, CallbacksRunOffTheEngineThread) {
  Engine engine(*runner_, *tok_, {});
  OutputProcessor outputs(engine, *tok_);
  std::mutex mu;
  std::vector<std::thread::id> seen;
  ASSERT_FALSE(outputs.submit(request("a", 8), [&](const RequestOutput&) {
    std::lock_guard lock(mu);
    seen.push_back(std::this_thread::get_id());
  }));
  while (engine.step()) {
  }
  outputs.flush();
  ASSERT_EQ(seen.size(), 8u);
  for (std::thread::id id : seen) EXPECT_NE(id, std::this_thread::get_id());  // the engine stepped here
}

// The text ends before the stop string; the engine request is cancelled (its blocks freed) even
// though the engine itself never looks at text.
TEST_F(OutputThread, StopStringEndsTheRequestAndCancelsIt) {
  std::string full;
  {
    Engine engine(*runner_, *tok_, {});
    OutputProcessor outputs(engine, *tok_);
    ASSERT_FALSE(outputs.submit(request("full", 40), [&](const RequestOutput& o) { full += o.text; }));
    while (engine.step()) {
    }
    outputs.flush();
  }
  ASSERT_GE(full.size(), 20u);
  const std::string stop = full.substr(10, 3);

  Engine engine(*runner_, *tok_, {});
  engine.start();
  OutputProcessor outputs(engine, *tok_);
  std::mutex mu;
  std::condition_variable done;
  std::string text;
  std::optional<FinishReason> finish;
  std::optional<std::string> stop_string;
  int32_t num_output_tokens = 0;
  GenerateRequest r = request("stopped", 1000);  // would run far past the stop string
  r.params.stop = {stop};
  ASSERT_FALSE(outputs.submit(r, [&](const RequestOutput& o) {
    std::lock_guard lock(mu);
    text += o.text;
    if (o.finish) {
      finish = o.finish;
      stop_string = o.stop_string;
      num_output_tokens = o.num_output_tokens;
      done.notify_all();
    }
  }));
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(done.wait_for(lock, 10s, [&] { return finish.has_value(); }));
  }
  EXPECT_EQ(*finish, FinishReason::Stop);
  EXPECT_EQ(stop_string, stop);  // the string that ended it is reported
  EXPECT_EQ(text, full.substr(0, full.find(stop)));
  EXPECT_LT(num_output_tokens, 20);
  EXPECT_TRUE(engine_idle(engine));  // cancelled, not left to run 4000 tokens
  engine.stop();
}

// A consumer stuck in its callback (a full socket, a stalled log pipe) holds only the output
// thread: the engine keeps stepping and finishes the request meanwhile.
TEST_F(OutputThread, BlockedConsumerDoesNotStallTheEngine) {
  Engine engine(*runner_, *tok_, {});
  engine.start();
  OutputProcessor outputs(engine, *tok_);
  std::mutex gate;
  gate.lock();
  std::atomic<int> events{0};
  ASSERT_FALSE(outputs.submit(request("a", 50), [&](const RequestOutput&) {
    if (events++ == 0) {
      gate.lock();  // blocks here until the test opens the gate
      gate.unlock();
    }
  }));
  // All 50 tokens are computed and the request's blocks freed while its first event is still
  // stuck in the consumer.
  const auto deadline = Clock::now() + 10s;
  // (The output thread may reach the consumer only after the engine is done: wait for both.)
  while ((engine.stats().num_steps < 50 || events.load() == 0) && Clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_GE(engine.stats().num_steps, 50) << "the engine waited for the consumer";
  EXPECT_TRUE(engine_idle(engine));
  EXPECT_EQ(events.load(), 1);
  gate.unlock();
  outputs.flush();
  EXPECT_EQ(events.load(), 50);
  engine.stop();
}

}  // namespace
}  // namespace flashserve
