// The engine on its own thread, as the server will use it: concurrent submitters, cancellation
// mid-stream, overload refusal, shutdown with requests in flight.
#include <gtest/gtest.h>

#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "tests/util/engine_harness.h"
#include "tests/util/fake_runner.h"
#include "tests/util/tiny_model.h"

namespace flashserve {
namespace {

using namespace std::chrono_literals;

// Collects events of many requests from the engine thread; lets the test wait for finishes.
class Collector {
 public:
  OutputCallback callback() {
    return [this](const RequestOutput& o) {
      std::lock_guard lock(mu_);
      tokens_[o.req_id] += int32_t(o.tokens.size());
      if (o.finish) {
        finish_[o.req_id] = *o.finish;
        done_.notify_all();
      }
    };
  }
  bool wait_finished(size_t n, std::chrono::seconds timeout = 30s) {
    std::unique_lock lock(mu_);
    return done_.wait_for(lock, timeout, [&] { return finish_.size() >= n; });
  }
  bool wait_tokens(const std::string& id, int32_t n) {
    for (int i = 0; i < 3000; ++i) {
      {
        std::lock_guard lock(mu_);
        if (tokens_[id] >= n) return true;
      }
      std::this_thread::sleep_for(1ms);
    }
    return false;
  }
  std::map<std::string, FinishReason> finishes() {
    std::lock_guard lock(mu_);
    return finish_;
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  std::map<std::string, int32_t> tokens_;
  std::map<std::string, FinishReason> finish_;
};

class EngineThreads : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = test::tiny_tokenizer();
    runner_ = std::make_unique<test::FakeRunner>(test::kTinyVocab, 256, 16, 4096);
  }
  GenerateRequest request(const std::string& id, int32_t max_tokens) {
    return {id, {'h', 'e', 'l', 'l', 'o'}, test::greedy(max_tokens)};
  }
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<test::FakeRunner> runner_;
};

TEST_F(EngineThreads, ConcurrentSubmittersAllFinish) {
  Engine engine(*runner_, *tok_, {});
  engine.start();
  Collector c;
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 8; ++i) EXPECT_FALSE(engine.submit(request("t" + std::to_string(t) + "-" + std::to_string(i), 20), c.callback()));
    });
  }
  for (auto& th : clients) th.join();
  ASSERT_TRUE(c.wait_finished(32));
  for (const auto& [id, reason] : c.finishes()) EXPECT_EQ(reason, FinishReason::Length) << id;
  engine.stop();
  EXPECT_EQ(engine.stats().num_free_kv_blocks, 256);
}

TEST_F(EngineThreads, CancelMidStreamFreesBlocks) {
  Engine engine(*runner_, *tok_, {});
  engine.start();
  Collector c;
  ASSERT_FALSE(engine.submit(request("long", 3000), c.callback()));
  ASSERT_TRUE(c.wait_tokens("long", 5));
  EXPECT_LT(engine.stats().num_free_kv_blocks, 256);
  engine.cancel("long");
  ASSERT_TRUE(c.wait_finished(1));
  EXPECT_EQ(c.finishes().at("long"), FinishReason::Abort);
  // The engine frees the blocks before it reports the abort.
  EXPECT_EQ(engine.stats().num_free_kv_blocks, 256);
  engine.stop();
}

TEST_F(EngineThreads, RefusesPastTheWaitingBound) {
  EngineConfig cfg;
  cfg.max_waiting = 2;
  Collector c;
  Engine engine(*runner_, *tok_, cfg);  // not started: nothing drains the queue
  EXPECT_FALSE(engine.submit(request("a", 4), c.callback()));
  EXPECT_FALSE(engine.submit(request("b", 4), c.callback()));
  const auto refused = engine.submit(request("c", 4), c.callback());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->kind, ErrorKind::Overloaded);
}

// --max-waiting counts requests accepted and not yet started, exactly, and a request's choices are
// admitted together or not at all.
TEST_F(EngineThreads, WaitingBoundIsExactAndChoicesAreAllOrNothing) {
  EngineConfig cfg;
  cfg.max_waiting = 3;
  Collector c;  // outlives the engine, whose shutdown reports to it
  Engine engine(*runner_, *tok_, cfg);
  auto batch = [&](const std::string& id, int n) {
    std::vector<Submission> b;
    for (int i = 0; i < n; ++i) b.push_back({request(id + std::to_string(i), 4), c.callback()});
    return b;
  };
  EXPECT_FALSE(engine.submit(batch("a", 2)));
  const auto two_more = engine.submit(batch("b", 2));
  ASSERT_TRUE(two_more);
  EXPECT_EQ(two_more->kind, ErrorKind::Overloaded);
  EXPECT_FALSE(engine.submit(batch("c", 1)));
  const auto never = engine.submit(batch("d", 4));  // more than the queue can ever hold
  ASSERT_TRUE(never);
  EXPECT_EQ(never->kind, ErrorKind::Invalid);
  // Stepping starts them; the slots come back as requests start, not when they finish.
  engine.step();
  EXPECT_EQ(engine.stats().num_not_started, 0);
  EXPECT_FALSE(engine.submit(batch("e", 3)));
  EXPECT_EQ(engine.stats().num_not_started, 3);
}

TEST_F(EngineThreads, QueueTimeLimitDropsWhatWaitedTooLong) {
  EngineConfig cfg;
  cfg.max_queue_time = std::chrono::milliseconds(500);
  Collector c;
  Engine engine(*runner_, *tok_, cfg);
  GenerateRequest old = request("old", 4);
  old.arrival = Clock::now() - std::chrono::seconds(1);  // waited in the front-end already
  ASSERT_FALSE(engine.submit(old, c.callback()));
  ASSERT_FALSE(engine.submit(request("new", 4), c.callback()));
  engine.step();
  EXPECT_EQ(c.finishes().at("old"), FinishReason::Abort);
  EXPECT_EQ(c.finishes().count("new"), 0u);
  EXPECT_EQ(engine.stats().num_not_started, 0);
}

// A runner whose every step takes at least `delay`: the rate at which it works a queue off is then
// bounded from above whatever the machine, and a busy machine only makes it lower.
class SlowRunner : public test::FakeRunner {
 public:
  explicit SlowRunner(std::chrono::milliseconds delay) : FakeRunner(test::kTinyVocab, 256, 16, 4096), delay_(delay) {}
  ForwardOutput forward(const ForwardBatch& batch) override {
    std::this_thread::sleep_for(delay_);
    return FakeRunner::forward(batch);
  }

 private:
  std::chrono::milliseconds delay_;
};

// One request at a time, 8 steps of at least 25 ms each: at most 5 start a second. With 400 queued
// the next would wait at least 80 s, past the 60 s limit (or a client's 30 s deadline), and is
// refused at once; with nothing queued it is admitted whatever the rate.
TEST_F(EngineThreads, RefusesAtOnceWhatTheBacklogWouldKeepPastTheQueueLimit) {
  SlowRunner runner(25ms);
  EngineConfig cfg;
  cfg.scheduler.max_num_seqs = 1;
  cfg.max_queue_time = 60s;
  Collector c;
  Engine engine(runner, *tok_, cfg);
  for (int i = 0; i < 400; ++i) ASSERT_FALSE(engine.submit(request("q" + std::to_string(i), 8), c.callback()));
  const auto start = Clock::now();
  while (Clock::now() - start < std::chrono::duration<double>(BacklogRate::kMinObservedSeconds + 0.5)) engine.step();
  const auto refused = engine.submit(request("late", 8), c.callback());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->kind, ErrorKind::Overloaded);
  EXPECT_NE(refused->message.find("past the server's queue limit of 60 s"), std::string::npos) << refused->message;
  GenerateRequest hurried = request("hurried", 8);  // the client gives up sooner than the server would
  hurried.deadline = Clock::now() + 30s;
  const auto refused_early = engine.submit(hurried, c.callback());
  ASSERT_TRUE(refused_early);
  EXPECT_NE(refused_early->message.find("past the request's deadline"), std::string::npos) << refused_early->message;

  engine.abort_all({ErrorKind::Unavailable, "test"});
  engine.step();
  EXPECT_EQ(engine.stats().num_not_started, 0);
  EXPECT_FALSE(engine.submit(request("alone", 8), c.callback()));
}

TEST_F(EngineThreads, RejectsInvalidRequestsUpFront) {
  Engine engine(*runner_, *tok_, {});
  Collector c;
  GenerateRequest bad = request("bad", 4);
  bad.params.top_p = 1.5f;
  EXPECT_EQ(engine.submit(bad, c.callback())->kind, ErrorKind::Invalid);
  GenerateRequest oov = request("oov", 4);
  oov.prompt_ids.push_back(test::kTinyVocab);
  EXPECT_EQ(engine.submit(oov, c.callback())->kind, ErrorKind::Invalid);
  EXPECT_EQ(engine.submit(request("huge", 5000), c.callback())->kind, ErrorKind::TooLong);
  EXPECT_EQ(engine.submit(request("int32-max", std::numeric_limits<int32_t>::max()), c.callback())->kind,
            ErrorKind::TooLong);
}

TEST_F(EngineThreads, StopAbortsWhatIsInFlight) {
  Collector c;
  {
    Engine engine(*runner_, *tok_, {});
    engine.start();
    ASSERT_FALSE(engine.submit(request("x", 3000), c.callback()));
    ASSERT_TRUE(c.wait_tokens("x", 2));
    engine.stop();
  }
  EXPECT_EQ(c.finishes().at("x"), FinishReason::Abort);
}

TEST_F(EngineThreads, HeartbeatAdvancesWhileIdle) {
  Engine engine(*runner_, *tok_, {});
  engine.start();
  const auto before = engine.stats().heartbeat;
  std::this_thread::sleep_for(250ms);
  EXPECT_GT(engine.stats().heartbeat, before);
  engine.stop();
}

}  // namespace
}  // namespace flashserve
