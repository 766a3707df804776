// A request's greedy output must not depend on how it was served: alone, batched with 31 others of
// mixed lengths, with its prompt chunked, after preemption, or with a prefix-cache hit. Checked with
// the fake runner (exercises block tables exactly) and with a tiny real Llama model.
#include <gtest/gtest.h>

#include <random>

#include "model/llama_model.h"
#include "tests/util/engine_harness.h"
#include "tests/util/fake_runner.h"
#include "tests/util/tiny_model.h"

namespace flashserve {
namespace {

using test::Job;

std::vector<Job> mixed_jobs(int n, uint32_t seed, int max_prompt, int max_output) {
  std::mt19937 rng(seed);
  std::vector<Job> jobs;
  for (int i = 0; i < n; ++i) {
    Job j;
    j.prompt.resize(1 + rng() % max_prompt);
    for (auto& t : j.prompt) t = int32_t(rng() % 256);
    j.params = test::greedy(1 + int32_t(rng() % max_output));
    jobs.push_back(std::move(j));
  }
  return jobs;
}

EngineConfig config(int32_t max_seqs, int32_t budget, bool prefix_caching = true) {
  EngineConfig c;
  c.scheduler.max_num_seqs = max_seqs;
  c.scheduler.max_num_batched_tokens = budget;
  c.enable_prefix_caching = prefix_caching;
  return c;
}

class EngineInvariance : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = test::tiny_tokenizer().release(); }
  static void TearDownTestSuite() { delete tok_; }

  // Each job alone in a roomy engine: the reference outputs.
  std::vector<std::vector<int32_t>> alone(ModelRunner& runner, const std::vector<Job>& jobs) {
    std::vector<std::vector<int32_t>> out;
    for (const Job& j : jobs) out.push_back(test::run_jobs(runner, *tok_, config(1, 4096, false), {j}).results[0].tokens);
    return out;
  }

  void expect_same(const test::RunStats& run, const std::vector<std::vector<int32_t>>& want) {
    ASSERT_EQ(run.results.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(run.results[i].tokens, want[i]) << "job " << i;
    EXPECT_EQ(run.engine.num_free_kv_blocks, run.engine.num_kv_blocks) << "blocks leaked";
  }

  static Tokenizer* tok_;
};
Tokenizer* EngineInvariance::tok_ = nullptr;

TEST_F(EngineInvariance, FakeModelBatchedChunkedPreemptedCached) {
  const auto jobs = mixed_jobs(32, 1, 200, 40);
  test::FakeRunner roomy(test::kTinyVocab, 1024, 16, 4096);
  const auto want = alone(roomy, jobs);

  const auto batched = test::run_jobs(roomy, *tok_, config(64, 4096), jobs);
  expect_same(batched, want);
  EXPECT_EQ(roomy.max_batch_seqs(), 32);

  const auto chunked = test::run_jobs(roomy, *tok_, config(64, 7), jobs);
  expect_same(chunked, want);

  test::FakeRunner tight(test::kTinyVocab, 24, 16, 4096);  // 384 slots for ~3,600 tokens of demand
  const auto preempted = test::run_jobs(tight, *tok_, config(64, 256), jobs);
  expect_same(preempted, want);
  EXPECT_GT(preempted.engine.num_preemptions, 0);

  // The same prompts again in one engine: the second round is served from the prefix cache.
  std::vector<Job> twice = jobs;
  twice.insert(twice.end(), jobs.begin(), jobs.end());
  auto want_twice = want;
  want_twice.insert(want_twice.end(), want.begin(), want.end());
  EngineConfig one_at_a_time = config(1, 4096);
  const auto cached = test::run_jobs(roomy, *tok_, one_at_a_time, twice);
  expect_same(cached, want_twice);
  int32_t hits = 0;
  for (size_t i = 32; i < 64; ++i) hits += cached.results[i].num_cached_tokens;
  EXPECT_GT(hits, 0);
  EXPECT_GT(cached.engine.prefix_cache.hit_tokens, 0);
}

TEST_F(EngineInvariance, TinyLlamaBatchedChunkedPreemptedCached) {
  test::TinyModelSpec spec;
  spec.matrix_type = kernels::DType::Q4_1;
  spec.embd_type = kernels::DType::Q8_0;
  const std::string path = test::temp_model_path("engine");
  test::write_tiny_model(path, spec);
  const auto model = LlamaModel::load(path);
  const auto jobs = mixed_jobs(32, 2, 60, 12);

  LlamaRunner roomy(*model, 256, 16);
  const auto want = alone(roomy, jobs);
  expect_same(test::run_jobs(roomy, *tok_, config(64, 4096), jobs), want);
  expect_same(test::run_jobs(roomy, *tok_, config(64, 5), jobs), want);

  LlamaRunner tight(*model, 12, 16);
  const auto preempted = test::run_jobs(tight, *tok_, config(64, 128), jobs);
  expect_same(preempted, want);
  EXPECT_GT(preempted.engine.num_preemptions, 0);

  Job long_prompt = mixed_jobs(1, 3, 1, 12)[0];
  long_prompt.prompt.assign(jobs[5].prompt.begin(), jobs[5].prompt.end());
  long_prompt.prompt.resize(50, 65);
  const auto cached = test::run_jobs(roomy, *tok_, config(1, 4096), {long_prompt, long_prompt});
  EXPECT_EQ(cached.results[1].tokens, alone(roomy, {long_prompt})[0]);
  EXPECT_EQ(cached.results[0].num_cached_tokens, 0);
  EXPECT_EQ(cached.results[1].num_cached_tokens, 48);  // three full blocks; the last token is recomputed
}

}  // namespace
}  // namespace flashserve
