// The batching policy on its own: budgets, chunking, admission, preemption, abort, fairness,
// priority. Drives Scheduler + KvCacheManager directly with made-up sampled tokens; no model.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>

#include "scheduler/scheduler.h"
#include "tests/util/engine_harness.h"

namespace flashserve {
namespace {

class SchedulerPolicy : public ::testing::Test {
 protected:
  void make(int32_t num_blocks, int32_t max_seqs, int32_t budget, bool priority = false) {
    kv_ = std::make_unique<KvCacheManager>(num_blocks, 16, true);
    SchedulerConfig c;
    c.max_num_seqs = max_seqs;
    c.max_num_batched_tokens = budget;
    c.max_model_len = 4096;
    c.priority_scheduling = priority;
    sched_ = std::make_unique<Scheduler>(c, *kv_);
  }

  Request* add(const std::string& id, int32_t prompt_len, int32_t max_tokens, int32_t priority = 0) {
    std::vector<int32_t> prompt(prompt_len);
    for (int32_t i = 0; i < prompt_len; ++i) prompt[i] = int32_t((std::hash<std::string>{}(id) + i) % 256);
    auto r = std::make_unique<Request>(GenerateRequest{id, prompt, test::greedy(max_tokens), priority}, 0);
    Request* raw = r.get();
    EXPECT_FALSE(sched_->check_fits(prompt_len, max_tokens));
    sched_->add(std::move(r));
    return raw;
  }

  // One step with token 'a' sampled for everyone who samples.
  SchedulerOutput step() {
    SchedulerOutput out = sched_->schedule();
    std::vector<SampledToken> sampled;
    SampledToken a;
    a.token = 'a';
    for (const ScheduledRequest& s : out.scheduled) sampled.insert(sampled.end(), s.samples ? 1 + s.drafts.size() : 0, a);
    EXPECT_LE(out.num_batched_tokens, budget());
    for (const RequestUpdate& u : sched_->update(out, sampled)) {
      if (u.req->finish) ended_[u.req->req_id] = {*u.req->finish, u.req->num_output_tokens(), u.req->num_preemptions};
    }
    return out;
  }

  int32_t budget() const { return sched_->config().max_num_batched_tokens; }
  int32_t tokens_for(const SchedulerOutput& out, const Request* r) const {
    for (const auto& s : out.scheduled) {
      if (s.req == r) return s.num_scheduled_tokens;
    }
    return 0;
  }

  std::unique_ptr<KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  // What step() saw end (a finished request is destroyed at the next schedule()).
  struct Ended {
    FinishReason reason;
    int32_t num_output_tokens;
    int32_t num_preemptions;
  };
  std::map<std::string, Ended> ended_;
};

// The engine's step budget (StepBudget) lowers a step below max_num_batched_tokens: running
// decodes still get their token, the prompt gets the rest; num_decoding counts the streams.
TEST_F(SchedulerPolicy, StepBudgetBelowTheConfiguredOne) {
  make(256, 8, 512);
  Request* a = add("a", 10, 50);
  step();
  EXPECT_EQ(sched_->num_decoding(), 1);
  Request* big = add("big", 300, 5);
  SchedulerOutput out = sched_->schedule(24);
  EXPECT_EQ(out.num_batched_tokens, 24);
  EXPECT_EQ(tokens_for(out, a), 1);
  EXPECT_EQ(tokens_for(out, big), 23);
  EXPECT_EQ(sched_->num_decoding(), 1);  // big is still in its prompt
  out = sched_->schedule(100000);  // never above the configured budget
  EXPECT_EQ(out.num_batched_tokens, 1 + 300);
}

TEST_F(SchedulerPolicy, LongPromptIsChunkedAndDecodesKeepRunning) {
  make(256, 8, 32);
  Request* a = add("a", 10, 50);
  step();  // a's whole prompt
  Request* big = add("big", 200, 5);
  for (int i = 0; i < 7; ++i) {
    const SchedulerOutput out = step();
    EXPECT_EQ(tokens_for(out, a), 1) << "decode stalled at step " << i;
    EXPECT_EQ(tokens_for(out, big), std::min(31, 200 - 31 * i)) << "step " << i;
    EXPECT_EQ(out.num_batched_tokens, std::min(32, 1 + 200 - 31 * i));
  }
  EXPECT_EQ(big->num_computed_tokens, 200);
  EXPECT_EQ(big->num_output_tokens(), 1);
}

TEST_F(SchedulerPolicy, MaxNumSeqsBoundsTheBatch) {
  make(256, 3, 512);
  for (int i = 0; i < 6; ++i) add("r" + std::to_string(i), 5, 4);
  for (int i = 0; i < 10; ++i) EXPECT_LE(step().scheduled.size(), 3u);
}

TEST_F(SchedulerPolicy, RejectsWhatCanNeverFit) {
  make(8, 4, 64);  // 128 tokens of KV
  EXPECT_EQ(sched_->check_fits(0, 4)->kind, ErrorKind::Invalid);
  EXPECT_EQ(sched_->check_fits(100, 29)->kind, ErrorKind::TooLong);  // 129 tokens > pool
  EXPECT_FALSE(sched_->check_fits(100, 28));
  EXPECT_EQ(sched_->check_fits(4000, 100)->kind, ErrorKind::TooLong);  // > context window
  EXPECT_NE(sched_->check_fits(4000, 100)->message.find("context window"), std::string::npos);
}

// A client may send max_tokens = INT32_MAX: prompt + max_tokens must not wrap into range.
TEST_F(SchedulerPolicy, FitCheckIsSixtyFourBit) {
  make(8, 4, 64);
  const auto huge = sched_->check_fits(5, std::numeric_limits<int32_t>::max());
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->kind, ErrorKind::TooLong);
  EXPECT_NE(huge->message.find("2147483647"), std::string::npos) << huge->message;
}

// Admitted without the fit check (as a request larger than the whole cache could only be by a
// bug), it is ended with an error once the cache is empty, instead of holding the head of the
// queue and spinning the engine forever; the request behind it is served.
TEST_F(SchedulerPolicy, RequestThatCannotFitEvenAloneIsEndedNotRequeued) {
  make(4, 4, 512);  // 64 tokens of KV
  auto big = std::make_unique<Request>(GenerateRequest{"big", std::vector<int32_t>(80, 'a'), test::greedy(4)}, 0);
  Request* raw = big.get();
  sched_->add(std::move(big));
  Request* small = add("small", 5, 2);
  const SchedulerOutput out = step();
  ASSERT_EQ(out.dropped.size(), 1u);
  EXPECT_EQ(out.dropped[0], raw);
  EXPECT_EQ(raw->finish, FinishReason::Abort);
  ASSERT_TRUE(raw->error);
  EXPECT_EQ(raw->error->kind, ErrorKind::TooLong);
  EXPECT_EQ(tokens_for(out, small), 5);
  while (sched_->has_work()) step();
  EXPECT_EQ(small->finish, FinishReason::Length);
}

// A request stops at its own end-of-generation ids (Engine::submit puts the tokenizer's there), past
// them with ignore_eos, and at stop_token_ids either way.
TEST_F(SchedulerPolicy, EndIdsTravelInTheRequest) {
  make(64, 4, 512);
  auto with_end = [&](const std::string& id, std::vector<int32_t> end_ids, bool ignore_eos,
                      std::vector<int32_t> stop_ids = {}) {
    SamplingParams p = test::greedy(3);
    p.end_ids = std::move(end_ids);
    p.ignore_eos = ignore_eos;
    p.stop_token_ids = std::move(stop_ids);
    auto r = std::make_unique<Request>(GenerateRequest{id, std::vector<int32_t>(4, 'b'), p}, 0);
    sched_->add(std::move(r));
  };
  with_end("ends", {'z', 'a'}, false);
  with_end("ignores", {'a'}, true);
  with_end("other", {'z'}, false);
  with_end("stops", {}, true, {'a'});
  while (sched_->has_work()) step();  // every step samples 'a'
  EXPECT_EQ(ended_.at("ends").reason, FinishReason::Stop);
  EXPECT_EQ(ended_.at("ends").num_output_tokens, 1);
  EXPECT_EQ(ended_.at("ignores").reason, FinishReason::Length);
  EXPECT_EQ(ended_.at("ignores").num_output_tokens, 3);
  EXPECT_EQ(ended_.at("other").reason, FinishReason::Length);
  EXPECT_EQ(ended_.at("stops").reason, FinishReason::Stop);
  EXPECT_EQ(ended_.at("stops").num_output_tokens, 1);
}

// The same when it grows past the cache while running alone (decode needs one more block).
TEST_F(SchedulerPolicy, RunningAloneOutOfBlocksIsEnded) {
  make(2, 4, 512);  // 32 tokens of KV
  auto r = std::make_unique<Request>(GenerateRequest{"r", std::vector<int32_t>(30, 'a'), test::greedy(10)}, 0);
  Request* raw = r.get();
  sched_->add(std::move(r));
  for (int i = 0; i < 10 && !raw->finish; ++i) step();
  EXPECT_EQ(raw->finish, FinishReason::Abort);
  ASSERT_TRUE(raw->error);
  EXPECT_EQ(raw->error->kind, ErrorKind::TooLong);
  EXPECT_FALSE(sched_->has_work());
  EXPECT_EQ(kv_->num_free_blocks(), 2);
}

// Under overload the steps go to requests that can still succeed: one whose client deadline has
// passed, or that waited past the server's queue limit without starting, is dropped before any of
// it is computed. A started request is not dropped by the queue limit (its work is underway).
TEST_F(SchedulerPolicy, ExpiredRequestsAreDroppedBeforeTheyRun) {
  make(64, 1, 512);
  Request* running = add("running", 5, 50);
  step();
  Request* late = add("late", 5, 2);
  late->start_deadline = Clock::now() - std::chrono::milliseconds(1);
  Request* gone = add("gone", 5, 2);
  gone->deadline = Clock::now() - std::chrono::milliseconds(1);
  Request* fine = add("fine", 5, 2);
  running->start_deadline = Clock::now() - std::chrono::milliseconds(1);
  const SchedulerOutput out = step();
  ASSERT_EQ(out.dropped.size(), 2u);
  EXPECT_EQ(late->error->kind, ErrorKind::Overloaded);
  EXPECT_EQ(gone->error->kind, ErrorKind::Deadline);
  EXPECT_EQ(late->num_computed_tokens, 0);
  EXPECT_EQ(gone->num_computed_tokens, 0);
  EXPECT_EQ(tokens_for(out, running), 1);
  EXPECT_FALSE(fine->finish);
  EXPECT_EQ(sched_->num_waiting(), 1);
}

TEST_F(SchedulerPolicy, PreemptsLatestArrivalAndResumesIt) {
  make(6, 8, 256);  // 96 tokens of KV
  add("first", 40, 30);
  add("second", 40, 30);
  int preempted_steps = 0;
  while (sched_->has_work()) preempted_steps += step().num_preempted > 0;
  EXPECT_GT(preempted_steps, 0);
  EXPECT_EQ(ended_.at("first").num_preemptions, 0);  // the older request is never the victim
  EXPECT_GT(ended_.at("second").num_preemptions, 0);
  EXPECT_EQ(kv_->num_free_blocks(), 6);
}

TEST_F(SchedulerPolicy, AbortFreesBlocksAtOnce) {
  make(64, 8, 256);
  add("keep", 20, 10);
  add("drop", 100, 10);
  step();
  const int32_t free_before = kv_->num_free_blocks();
  Request* dropped = sched_->abort("drop");
  ASSERT_NE(dropped, nullptr);
  EXPECT_EQ(*dropped->finish, FinishReason::Abort);
  EXPECT_EQ(kv_->num_free_blocks(), free_before + 7);  // 101 tokens held 7 blocks
  EXPECT_EQ(sched_->abort("drop"), nullptr);
  EXPECT_EQ(sched_->num_running(), 1);
}

// Sustained overload: requests keep arriving faster than they finish, the pool forces preemption.
// Every request must finish, first service must follow arrival order (FCFS), and no request may wait
// longer than the work queued ahead of it.
TEST_F(SchedulerPolicy, SustainedLoadIsServedInArrivalOrder) {
  make(20, 6, 64);
  std::mt19937 rng(9);
  std::vector<int> first_step;  // by request number (ids, not pointers: a finished request's memory is reused)
  int step_no = 0;
  for (; step_no < 5000 && (first_step.size() < 120 || sched_->has_work()); ++step_no) {
    if (first_step.size() < 120 && step_no % 2 == 0) {
      add("q" + std::to_string(first_step.size()), 1 + int32_t(rng() % 120), 1 + int32_t(rng() % 60));
      first_step.push_back(-1);
    }
    for (const auto& s : step().scheduled) {
      int& first = first_step.at(size_t(std::stoi(s.req->req_id.substr(1))));
      if (first < 0) first = step_no;
    }
  }
  ASSERT_FALSE(sched_->has_work()) << "work left after " << step_no << " steps";
  for (size_t i = 1; i < first_step.size(); ++i) EXPECT_LE(first_step[i - 1], first_step[i]) << "request " << i << " overtook";
  EXPECT_EQ(kv_->num_free_blocks(), 20);
}

TEST_F(SchedulerPolicy, PriorityOrdersTheQueue) {
  make(64, 1, 512, /*priority=*/true);
  add("low", 5, 2, 5);
  add("high", 5, 2, 0);
  add("mid", 5, 2, 1);
  std::vector<std::string> order;
  while (sched_->has_work()) {
    for (const auto& s : step().scheduled) {
      if (order.empty() || order.back() != s.req->req_id) order.push_back(s.req->req_id);
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"high", "mid", "low"}));
}

}  // namespace
}  // namespace flashserve
