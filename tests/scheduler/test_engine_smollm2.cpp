// On the real SmolLM2: a chat request's greedy answer is token-for-token the same alone, batched
// with 31 others of mixed lengths, with its prompt chunked, after preemption, and with a prefix hit.
#include <gtest/gtest.h>

#include <random>

#include "model/model.h"
#include "tests/util/engine_harness.h"
#include "tests/util/runners.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

using test::Job;

class EngineSmolLM2 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = Model::load(test::real_model_path()).release(); }
  static void TearDownTestSuite() { delete model_; }

  static Job target() {
    return {model_->encode_chat(model_->chat_template(), {{"user", "Explain photosynthesis in simple terms."}}),
            test::greedy(24)};
  }

  // The target second, behind one long request whose growth forces the target (the later arrival)
  // out when KV runs short, then 30 more of mixed lengths.
  static std::vector<Job> crowd() {
    std::mt19937 rng(4);
    std::vector<Job> jobs(1);
    jobs[0].prompt.resize(130);  // 9 blocks; the target's ~36-token prompt takes the other 3
    for (auto& t : jobs[0].prompt) t = int32_t(rng() % 49152);
    jobs[0].params = test::greedy(50);
    jobs.push_back(target());
    for (int i = 0; i < 30; ++i) {
      Job j;
      j.prompt.resize(5 + rng() % 30);
      for (auto& t : j.prompt) t = int32_t(rng() % 49152);
      j.params = test::greedy(2 + int32_t(rng() % 7));
      jobs.push_back(std::move(j));
    }
    return jobs;
  }

  static EngineConfig config(int32_t max_seqs, int32_t budget, bool prefix_caching) {
    EngineConfig c;
    c.scheduler.max_num_seqs = max_seqs;
    c.scheduler.max_num_batched_tokens = budget;
    c.enable_prefix_caching = prefix_caching;
    return c;
  }

  static Model* model_;
};
Model* EngineSmolLM2::model_ = nullptr;

TEST_F(EngineSmolLM2, GreedyAnswerIsIndependentOfHowItIsServed) {
  const Tokenizer& tok = model_->tokenizer();
  auto roomy = test::cpu_runner(*model_, 256);
  const test::JobResult alone = test::run_jobs(*roomy, tok, config(1, 4096, false), {target()}).results[0];
  ASSERT_EQ(alone.tokens.size(), 24u);
  std::printf("[ answer    ] %s\n", alone.text.c_str());
  EXPECT_NE(alone.text.find("Photosynthesis"), std::string::npos);

  const auto jobs = crowd();
  const auto batched = test::run_jobs(*roomy, tok, config(64, 4096, true), jobs);
  EXPECT_EQ(batched.results[1].tokens, alone.tokens) << "batched with 31 others";

  const auto chunked = test::run_jobs(*roomy, tok, config(64, 32, true), jobs);
  EXPECT_EQ(chunked.results[1].tokens, alone.tokens) << "chunked prefill";

  auto tight = test::cpu_runner(*model_, 12);  // 192 tokens of KV for all 32; the long one alone needs 180
  const auto preempted = test::run_jobs(*tight, tok, config(64, 256, true), jobs);
  EXPECT_EQ(preempted.results[1].tokens, alone.tokens) << "after preemption";
  EXPECT_GT(preempted.results[1].num_preemptions, 0);

  const auto twice = test::run_jobs(*roomy, tok, config(1, 4096, true), {target(), target()});
  EXPECT_EQ(twice.results[1].tokens, alone.tokens) << "with a prefix-cache hit";
  EXPECT_EQ(twice.results[1].num_cached_tokens, (int32_t(target().prompt.size()) - 1) / 16 * 16);
  EXPECT_GT(twice.results[1].num_cached_tokens, 0);
}

}  // namespace
}  // namespace flashserve
