// A request's greedy output must not depend on how it was served: alone, batched with 31 others of
// mixed lengths, with its prompt chunked, after preemption, or with a prefix-cache hit. Checked with
// the fake runner (exercises block tables exactly) and with a tiny real Llama model.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "model/model.h"
#include "tests/util/engine_harness.h"
#include "tests/util/fake_runner.h"
#include "tests/util/runners.h"
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

  // The same prompts twice in one engine, one at a time: the second round is served from the prefix
  // cache, and still gives each job's tokens.
  test::RunStats run_twice(ModelRunner& runner, const std::vector<Job>& jobs,
                           const std::vector<std::vector<int32_t>>& want) {
    std::vector<Job> twice = jobs;
    twice.insert(twice.end(), jobs.begin(), jobs.end());
    auto want_twice = want;
    want_twice.insert(want_twice.end(), want.begin(), want.end());
    test::RunStats cached = test::run_jobs(runner, *tok_, config(1, 4096), twice);
    expect_same(cached, want_twice);
    EXPECT_GT(cached.engine.prefix_cache.hit_tokens, 0);
    return cached;
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

  const auto cached = run_twice(roomy, jobs, want);
  int32_t hits = 0;
  for (size_t i = 32; i < 64; ++i) hits += cached.results[i].num_cached_tokens;
  EXPECT_GT(hits, 0);
}

TEST_F(EngineInvariance, TinyLlamaBatchedChunkedPreemptedCached) {
  test::TinyModelSpec spec;
  spec.matrix_type = kernels::DType::Q4_1;
  spec.embd_type = kernels::DType::Q8_0;
  const std::string path = test::temp_model_path("engine");
  test::write_tiny_model(path, spec);
  const auto model = Model::load(path);
  const auto jobs = mixed_jobs(32, 2, 60, 12);

  const auto roomy_runner = test::cpu_runner(*model, 256);
  ModelRunner& roomy = *roomy_runner;
  const auto want = alone(roomy, jobs);
  expect_same(test::run_jobs(roomy, *tok_, config(64, 4096), jobs), want);
  expect_same(test::run_jobs(roomy, *tok_, config(64, 5), jobs), want);

  const auto tight_runner = test::cpu_runner(*model, 12);
  ModelRunner& tight = *tight_runner;
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

// A q8_0 KV cache (blocks of 32 values with a scale) or an fp8 one quantizes each token's K and V
// once, when written: batching, chunking, preemption and prefix-cache hits still change no token.
TEST_F(EngineInvariance, TinyLlamaEightBitKvCachesBatchedPreemptedCached) {
  test::TinyModelSpec spec;
  spec.dim = 128;  // head_dim 32: whole q8_0 blocks
  spec.matrix_type = kernels::DType::Q4_1;
  spec.embd_type = kernels::DType::Q8_0;
  const auto model = test::load_tiny_model(spec, "engine_q8_kv");
  const auto jobs = mixed_jobs(16, 4, 60, 12);
  for (const kernels::DType kv : {kernels::DType::Q8_0, kernels::DType::F8_E4M3}) {
    SCOPED_TRACE(kernels::dtype_name(kv));
    const auto roomy = test::cpu_runner(*model, 256, 16, true, kv);
    const auto want = alone(*roomy, jobs);
    expect_same(test::run_jobs(*roomy, *tok_, config(64, 7), jobs), want);
    const auto tight = test::cpu_runner(*model, 10, 16, true, kv);
    const auto preempted = test::run_jobs(*tight, *tok_, config(64, 128), jobs);
    expect_same(preempted, want);
    EXPECT_GT(preempted.engine.num_preemptions, 0);
    run_twice(*roomy, jobs, want);
  }
}

// The runner keeps the tables of running sequences only: a finished one's copy is released with
// the next step that runs, so a long-lived server's runner does not grow with what it served.
TEST_F(EngineInvariance, RunnerKeepsOnlyRunningSequencesTables) {
  test::FakeRunner runner(test::kTinyVocab, 64, 4, 4096);
  Engine engine(runner, *tok_, config(8, 64));
  int finished = 0;
  auto submit = [&](const std::string& id, int32_t max_tokens) {
    EXPECT_FALSE(engine.submit({id, std::vector<int32_t>(6, 'a'), test::greedy(max_tokens)},
                               [&](const RequestOutput& o) { finished += o.finish.has_value(); }));
  };
  submit("short", 2);
  submit("long", 20);
  while (finished == 0) ASSERT_TRUE(engine.step());
  EXPECT_EQ(runner.num_kept_tables(), 2u);  // the release travels with the next step
  ASSERT_TRUE(engine.step());
  EXPECT_EQ(runner.num_kept_tables(), 1u);
  while (engine.step()) {
  }
  EXPECT_EQ(finished, 2);
  submit("next", 3);
  ASSERT_TRUE(engine.step());
  EXPECT_EQ(runner.num_kept_tables(), 1u);
}

// Sliding-window KV groups (one full-attention group and two windowed ones, as Gemma 3 has; and
// windows only, as Mistral): blocks out of every window go back to the pool as a sequence grows, and
// are reused by others. The fake model reads each group's window back from the cache, so a block
// freed too early, or reused while still visible, changes the output.
TEST_F(EngineInvariance, FakeModelWithSlidingWindowGroups) {
  const auto jobs = mixed_jobs(24, 4, 120, 40);
  for (const std::vector<int32_t>& windows : {std::vector<int32_t>{0, 8, 8}, std::vector<int32_t>{8}}) {
    SCOPED_TRACE(::testing::PrintToString(windows));
    test::FakeRunner roomy(test::kTinyVocab, 2048, 4, 4096, windows);
    const auto want = alone(roomy, jobs);
    expect_same(test::run_jobs(roomy, *tok_, config(64, 4096), jobs), want);
    expect_same(test::run_jobs(roomy, *tok_, config(64, 7), jobs), want);

    test::FakeRunner tight(test::kTinyVocab, windows.size() == 1 ? 16 : 144, 4, 4096, windows);
    const auto preempted = test::run_jobs(tight, *tok_, config(64, 16), jobs);
    expect_same(preempted, want);
    EXPECT_GT(preempted.engine.num_preemptions, 0);

    run_twice(roomy, jobs, want);
  }
}

// Only windows: a sequence of 400 tokens runs in a pool of 12 blocks of 4 (48 positions), taking at
// most the window plus a step's tokens at a time.
TEST_F(EngineInvariance, WindowedSequenceOutgrowsThePool) {
  Job j = mixed_jobs(1, 5, 1, 1)[0];
  j.prompt.assign(100, 7);
  j.params = test::greedy(300);
  test::FakeRunner roomy(test::kTinyVocab, 1024, 4, 4096, {8});
  test::FakeRunner small(test::kTinyVocab, 12, 4, 4096, {8});
  const auto want = alone(roomy, {j});
  const auto run = test::run_jobs(small, *tok_, config(4, 16), {j});
  expect_same(run, want);
  ASSERT_EQ(run.results[0].tokens.size(), 300u);
}

// Gemma 3's layout on the real runner: five sliding-window layers (window 8) and a global one, so
// six KV groups of one layer, blocks of 4 positions.
TEST_F(EngineInvariance, TinyGemma3BatchedChunkedPreemptedCached) {
  test::TinyModelSpec spec;
  spec.arch = "gemma3";
  spec.num_layers = 6;
  spec.matrix_type = kernels::DType::Q8_0;
  const std::string path = test::temp_model_path("engine-gemma3");
  test::write_tiny_model(path, spec);
  const auto model = Model::load(path);
  const auto jobs = mixed_jobs(16, 6, 60, 24);

  const auto roomy_runner = test::cpu_runner(*model, 512, 4);
  ModelRunner& roomy = *roomy_runner;
  ASSERT_EQ(roomy.kv_group_windows(), (std::vector<int32_t>{0, 8, 8, 8, 8, 8}));
  const auto want = alone(roomy, jobs);
  expect_same(test::run_jobs(roomy, *tok_, config(64, 4096), jobs), want);
  expect_same(test::run_jobs(roomy, *tok_, config(64, 5), jobs), want);

  const auto tight_runner = test::cpu_runner(*model, 8, 4);  // 48 blocks; one job can hold 46
  ModelRunner& tight = *tight_runner;
  const auto preempted = test::run_jobs(tight, *tok_, config(64, 8), jobs);
  expect_same(preempted, want);
  EXPECT_GT(preempted.engine.num_preemptions, 0);

  // 100 positions: 25 blocks per group, 150 without freeing; the pool has 60.
  Job long_job = jobs[0];
  long_job.prompt.resize(60, 65);
  long_job.params = test::greedy(40);
  const auto small_runner = test::cpu_runner(*model, 10, 4);
  const auto run = test::run_jobs(*small_runner, *tok_, config(4, 8), {long_job});
  expect_same(run, alone(roomy, {long_job}));

  const auto cached = test::run_jobs(roomy, *tok_, config(1, 4096), {long_job, long_job});
  EXPECT_EQ(cached.results[1].tokens, cached.results[0].tokens);
  EXPECT_EQ(cached.results[1].num_cached_tokens, 56);  // 14 full blocks; the last token is recomputed
}

TEST_F(EngineInvariance, SeededSamplingIgnoresWhatElseRuns) {
  test::FakeRunner runner(test::kTinyVocab, 1024, 16, 4096);
  Job sampled{{'s', 'e', 'e', 'd'}, test::greedy(40)};
  sampled.params.temperature = 1.5f;
  sampled.params.top_p = 0.9f;
  sampled.params.seed = 42;
  const auto alone_run = test::run_jobs(runner, *tok_, config(1, 4096), {sampled}).results[0].tokens;
  auto crowd = mixed_jobs(16, 5, 50, 30);
  for (auto& j : crowd) j.params.temperature = 1.0f;  // others sample too, from their own RNGs
  crowd.insert(crowd.begin() + 7, sampled);
  const auto batched = test::run_jobs(runner, *tok_, config(64, 16), crowd);
  EXPECT_EQ(batched.results[7].tokens, alone_run);
  Job other_seed = sampled;
  other_seed.params.seed = 43;
  EXPECT_NE(test::run_jobs(runner, *tok_, config(1, 4096), {other_seed}).results[0].tokens, alone_run);
}

// Logprobs describe the raw logits and bring rows to the host; they must not change what is drawn,
// whatever the mix of greedy, seeded and penalised requests in the batch.
TEST_F(EngineInvariance, AskingForLogprobsChangesNoToken) {
  auto jobs = mixed_jobs(24, 9, 40, 30);
  for (size_t i = 0; i < jobs.size(); ++i) {
    SamplingParams& p = jobs[i].params;
    if (i % 4 == 0) continue;  // greedy
    p.temperature = 0.5f + 0.1f * float(i % 7);
    p.seed = 100 + i;
    p.top_k = i % 3 == 0 ? 20 : 0;
    p.top_p = i % 5 == 0 ? 0.8f : 1.0f;
    p.min_p = i % 6 == 1 ? 0.05f : 0.0f;
    p.repetition_penalty = i % 2 ? 1.3f : 1.0f;
    p.frequency_penalty = i % 3 == 1 ? 0.5f : 0.0f;
    p.presence_penalty = i % 3 == 2 ? -0.4f : 0.0f;
    if (i % 7 == 3) p.logit_bias = {{'a', 2.0f}, {'e', -1.5f}};
  }
  auto with_logprobs = jobs;
  for (size_t i = 0; i < jobs.size(); i += 2) with_logprobs[i].params.logprobs = int32_t(i % 3);
  test::FakeRunner runner(test::kTinyVocab, 1024, 16, 4096);
  const auto want = test::run_jobs(runner, *tok_, config(8, 64), jobs);
  const auto got = test::run_jobs(runner, *tok_, config(8, 64), with_logprobs);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(got.results[i].tokens, want.results[i].tokens) << "job " << i;
}

TEST_F(EngineInvariance, StopStringsAndStopTokensEndGeneration) {
  test::FakeRunner runner(test::kTinyVocab, 1024, 16, 4096);
  Job job{{'a', 'b', 'c'}, test::greedy(40)};
  const test::JobResult full = test::run_jobs(runner, *tok_, config(4, 512), {job}).results[0];
  ASSERT_EQ(full.tokens.size(), 40u);
  EXPECT_EQ(*full.finish, FinishReason::Length);

  // A stop string from the middle of the text: generation ends before it, and it is never emitted.
  const std::string stop = full.text.substr(10, 3);
  Job with_stop = job;
  with_stop.params.stop = {stop};
  const test::JobResult stopped = test::run_jobs(runner, *tok_, config(4, 512), {with_stop}).results[0];
  EXPECT_EQ(*stopped.finish, FinishReason::Stop);
  EXPECT_EQ(stopped.text, full.text.substr(0, full.text.find(stop)));

  Job with_stop_token = job;
  with_stop_token.params.stop_token_ids = {full.tokens[5]};
  const test::JobResult by_token = test::run_jobs(runner, *tok_, config(4, 512), {with_stop_token}).results[0];
  EXPECT_EQ(*by_token.finish, FinishReason::Stop);
  const size_t first = std::find(full.tokens.begin(), full.tokens.end(), full.tokens[5]) - full.tokens.begin();
  EXPECT_EQ(by_token.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + first + 1));
}

TEST_F(EngineInvariance, EndOfSequenceStopsUnlessIgnored) {
  test::FakeRunner runner(test::kTinyVocab, 1024, 16, 4096);
  Job job{{'x'}, test::greedy(10)};
  job.params.ignore_eos = false;
  job.params.logit_bias = {{tok_->eos_id(), 100.0f}};  // force EOS first
  const test::JobResult eos = test::run_jobs(runner, *tok_, config(4, 512), {job}).results[0];
  EXPECT_EQ(*eos.finish, FinishReason::Stop);
  EXPECT_EQ(eos.tokens, std::vector<int32_t>{tok_->eos_id()});
  EXPECT_EQ(eos.text, "");
  job.params.ignore_eos = true;
  const test::JobResult ignored = test::run_jobs(runner, *tok_, config(4, 512), {job}).results[0];
  EXPECT_EQ(*ignored.finish, FinishReason::Length);
  EXPECT_EQ(ignored.tokens.size(), 10u);
}

TEST_F(EngineInvariance, LogprobsReachTheEvents) {
  test::FakeRunner runner(test::kTinyVocab, 64, 16, 4096);
  Engine engine(runner, *tok_, config(4, 512));
  SamplingParams p = test::greedy(3);
  p.logprobs = 2;
  std::vector<SampledToken> seen;
  ASSERT_FALSE(engine.submit({"lp", {'q'}, p}, [&](const RequestOutput& o) {
    seen.insert(seen.end(), o.tokens.begin(), o.tokens.end());
  }));
  while (engine.step()) {
  }
  ASSERT_EQ(seen.size(), 3u);
  for (const SampledToken& t : seen) {
    ASSERT_EQ(t.top_logprobs.size(), 2u);
    EXPECT_EQ(t.top_logprobs[0].first, t.token);  // greedy picks the likeliest
    EXPECT_FLOAT_EQ(t.top_logprobs[0].second, t.logprob);
    EXPECT_LT(t.logprob, 0.0f);
    EXPECT_GE(t.top_logprobs[0].second, t.top_logprobs[1].second);
  }
}

}  // namespace
}  // namespace flashserve
