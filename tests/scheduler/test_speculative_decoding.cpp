// Speculative decoding must change how fast tokens come, never which: greedy and seeded requests
// give the same tokens, logprobs and text with drafts as without, batched, chunked, preempted,
// cancelled, constrained and stopped; rejected drafts leave no trace in the KV cache or the prefix
// cache. The fake runner's copy mode makes drafts that are mostly right and sometimes wrong, and
// reads every token of its context back through the block tables, so a rejected draft's KV taken
// for a real token changes the output.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "grammar/gbnf_parser.h"
#include "model/model.h"
#include "scheduler/grammar_vocabulary.h"
#include "scheduler/output_processor.h"
#include "tests/util/engine_harness.h"
#include "tests/util/fake_runner.h"
#include "tests/util/runners.h"
#include "tests/util/tiny_model.h"

namespace flashserve {
namespace {

using test::Job;

EngineConfig config(SpeculativeMethod method, int32_t max_seqs = 16, int32_t budget = 512, int32_t k = 5) {
  EngineConfig c;
  c.scheduler.max_num_seqs = max_seqs;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.speculative.method = method;
  c.scheduler.speculative.num_speculative_tokens = k;
  c.scheduler.speculative.min_acceptance = 0.25;  // not the measured step cost: the same drafts on any machine
  return c;
}

// Prompts that repeat a short phrase: the copying runner continues them, and prompt lookup finds them.
std::vector<Job> repetitive_jobs(int n, uint32_t seed, int32_t max_tokens) {
  std::mt19937 rng(seed);
  std::vector<Job> jobs;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> phrase(3 + rng() % 6);
    for (int32_t& t : phrase) t = int32_t('a' + rng() % 26);
    Job j;
    for (int r = 0; r < 3; ++r) j.prompt.insert(j.prompt.end(), phrase.begin(), phrase.end());
    j.params = test::greedy(max_tokens);
    jobs.push_back(std::move(j));
  }
  return jobs;
}

class SpeculativeDecoding : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = test::tiny_tokenizer().release(); }
  static void TearDownTestSuite() { delete tok_; }

  static test::RunStats run(ModelRunner& runner, const EngineConfig& cfg, const std::vector<Job>& jobs) {
    return test::run_jobs(runner, *tok_, cfg, jobs);
  }
  static void expect_same(const test::RunStats& got, const test::RunStats& want) {
    ASSERT_EQ(got.results.size(), want.results.size());
    for (size_t i = 0; i < want.results.size(); ++i) {
      const test::JobResult &g = got.results[i], &w = want.results[i];
      EXPECT_EQ(g.tokens, w.tokens) << "job " << i;
      EXPECT_EQ(g.text, w.text) << "job " << i;
      EXPECT_EQ(g.finish, w.finish) << "job " << i;
      ASSERT_EQ(g.sampled.size(), w.sampled.size()) << "job " << i;
      for (size_t t = 0; t < w.sampled.size(); ++t) {
        EXPECT_EQ(g.sampled[t].logprob, w.sampled[t].logprob) << "job " << i << " token " << t;
        EXPECT_EQ(g.sampled[t].top_logprobs, w.sampled[t].top_logprobs) << "job " << i << " token " << t;
      }
    }
    EXPECT_EQ(got.engine.num_free_kv_blocks, got.engine.num_kv_blocks) << "blocks leaked";
  }
  // The jobs with speculation as `on` has it, checked against the same config with it off.
  static test::RunStats expect_same_as_off(ModelRunner& runner, const EngineConfig& on, const std::vector<Job>& jobs) {
    EngineConfig off = on;
    off.scheduler.speculative.method = SpeculativeMethod::Off;
    const auto want = run(runner, off, jobs);
    test::RunStats got = run(runner, on, jobs);
    expect_same(got, want);
    return got;
  }
  static void expect_drafts_kept_and_rejected(const test::RunStats& run) {
    const SpeculationStats& s = run.engine.speculation;
    EXPECT_GT(s.num_drafts, 0);
    EXPECT_GT(s.num_accepted_tokens, 0) << "no draft was ever right";
    EXPECT_LT(s.num_accepted_tokens, s.num_draft_tokens) << "no draft was ever wrong";
    EXPECT_GE(s.accepted_per_position[0], s.accepted_per_position[1]);
  }

  static Tokenizer* tok_;
};
Tokenizer* SpeculativeDecoding::tok_ = nullptr;

TEST_F(SpeculativeDecoding, GreedyTokensAreUnchangedBatchedChunkedAndPreempted) {
  test::FakeRunner roomy(test::kTinyVocab, 1024, 16, 4096);
  roomy.set_copy_period(7);
  const auto jobs = repetitive_jobs(24, 1, 60);
  const auto want = run(roomy, config(SpeculativeMethod::Off), jobs);
  for (SpeculativeMethod m : {SpeculativeMethod::Ngram, SpeculativeMethod::Suffix}) {
    SCOPED_TRACE(std::string(to_string(m)));
    const auto alone = run(roomy, config(m, 1), jobs);
    expect_same(alone, want);
    expect_drafts_kept_and_rejected(alone);
    expect_same(run(roomy, config(m, 16, 512), jobs), want);
    expect_same(run(roomy, config(m, 16, 9), jobs), want);  // drafts squeezed by a small budget
  }
  test::FakeRunner tight(test::kTinyVocab, 20, 16, 4096);
  tight.set_copy_period(7);
  const auto preempted = run(tight, config(SpeculativeMethod::Ngram, 16, 256), jobs);
  expect_same(preempted, want);
  EXPECT_GT(preempted.engine.num_preemptions, 0);
  EXPECT_GT(preempted.engine.speculation.num_accepted_tokens, 0);
}

// Sliding-window layers return blocks as they fall out of sight; drafts allocate past the window's
// edge and must not make the runner read a returned block.
TEST_F(SpeculativeDecoding, SlidingWindowGroupsKeepTheirTokens) {
  test::FakeRunner runner(test::kTinyVocab, 256, 4, 4096, {0, 8});
  runner.set_copy_period(7);
  const auto jobs = repetitive_jobs(8, 10, 60);
  const auto got = expect_same_as_off(runner, config(SpeculativeMethod::Ngram, 8, 64), jobs);
  expect_drafts_kept_and_rejected(got);
}

// Each row is sampled with the uniform plain decoding would use at that position, so a seeded
// request draws the same tokens, whatever its penalties, bias and logprobs.
TEST_F(SpeculativeDecoding, SeededSamplingAndLogprobsAreUnchanged) {
  test::FakeRunner runner(test::kTinyVocab, 1024, 16, 4096);
  runner.set_copy_period(5);
  auto jobs = repetitive_jobs(16, 2, 50);
  for (size_t i = 0; i < jobs.size(); ++i) {
    SamplingParams& p = jobs[i].params;
    p.logprobs = int32_t(i % 3);
    if (i % 4 == 0) continue;  // greedy
    p.temperature = 0.3f + 0.2f * float(i % 5);
    p.seed = 7 + i;
    p.top_k = i % 3 == 0 ? 20 : 0;
    p.top_p = i % 5 == 0 ? 0.9f : 1.0f;
    p.repetition_penalty = i % 2 ? 1.2f : 1.0f;
    p.frequency_penalty = i % 3 == 1 ? 0.4f : 0.0f;
    if (i % 7 == 3) p.logit_bias = {{'a', 1.0f}};
  }
  const auto got = expect_same_as_off(runner, config(SpeculativeMethod::Ngram, 4, 64), jobs);
  expect_drafts_kept_and_rejected(got);
}

TEST_F(SpeculativeDecoding, StopStringsStopTokensAndMaxTokensCutTheSameText) {
  test::FakeRunner runner(test::kTinyVocab, 1024, 16, 4096);
  runner.set_copy_period(6);
  const Job base = repetitive_jobs(1, 3, 40)[0];
  const test::JobResult full = run(runner, config(SpeculativeMethod::Off), {base}).results[0];
  ASSERT_EQ(full.tokens.size(), 40u);
  std::vector<Job> jobs;
  for (size_t cut : {5, 11, 23}) {
    Job by_string = base;
    by_string.params.stop = {full.text.substr(cut, 2)};
    jobs.push_back(by_string);
    Job by_token = base;
    by_token.params.stop_token_ids = {full.tokens[cut]};
    jobs.push_back(by_token);
    Job short_one = base;
    short_one.params.max_tokens = int32_t(cut);
    jobs.push_back(short_one);
  }
  const auto got = expect_same_as_off(runner, config(SpeculativeMethod::Ngram, 1, 512, 8), jobs);
  for (size_t i = 2; i < jobs.size(); i += 3) EXPECT_EQ(int32_t(got.results[i].tokens.size()), jobs[i].params.max_tokens);
  EXPECT_GT(got.engine.speculation.num_accepted_tokens, 0);
}

// Blocks that held a rejected draft are registered only once real tokens fill them: a later
// request that hits the prefix cache on a finished one's prompt and output computes the same.
TEST_F(SpeculativeDecoding, PrefixCacheNeverServesARejectedDraft) {
  test::FakeRunner runner(test::kTinyVocab, 256, 4, 4096);
  runner.set_copy_period(5);
  const Job first = repetitive_jobs(1, 4, 48)[0];
  const test::JobResult a = run(runner, config(SpeculativeMethod::Ngram), {first}).results[0];
  Job second = first;
  second.prompt.insert(second.prompt.end(), a.tokens.begin(), a.tokens.end());
  second.params.max_tokens = 20;
  const auto want = run(runner, config(SpeculativeMethod::Off, 1, 512), {second});
  // One engine: the first request's blocks are cached when the second arrives.
  const auto got = run(runner, config(SpeculativeMethod::Ngram, 1, 512), {first, second});
  EXPECT_EQ(got.results[1].tokens, want.results[0].tokens);
  EXPECT_GT(got.results[1].num_cached_tokens, int32_t(first.prompt.size()));
  expect_drafts_kept_and_rejected(got);
}

TEST_F(SpeculativeDecoding, GrammarRefusedDraftsAreRejected) {
  const auto g = std::make_shared<const grammar::CompiledGrammar>(
      grammar::parse_gbnf(R"(root ::= ("ab" | "abc" [0-9]){4,12} "!")"), grammar_vocabulary(*tok_, test::kTinyVocab));
  test::FakeRunner runner(test::kTinyVocab, 1024, 16, 4096);
  runner.set_copy_period(3);
  std::vector<Job> jobs = repetitive_jobs(8, 5, 40);
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].prompt = {'a', 'b', 'c', '1', 'a', 'b', 'a', 'b', 'c'};
    jobs[i].params.grammar = g;
    jobs[i].params.ignore_eos = false;
    if (i % 2) {
      jobs[i].params.temperature = 1.0f;
      jobs[i].params.seed = i;
    }
  }
  const auto got = expect_same_as_off(runner, config(SpeculativeMethod::Ngram), jobs);
  EXPECT_GT(got.engine.speculation.num_draft_tokens, got.engine.speculation.num_accepted_tokens);
}

TEST_F(SpeculativeDecoding, RequestOverridesTheServer) {
  test::FakeRunner runner(test::kTinyVocab, 1024, 16, 4096);
  runner.set_copy_period(7);
  Job job = repetitive_jobs(1, 6, 30)[0];
  const auto plain = run(runner, config(SpeculativeMethod::Off), {job});
  Job asks = job;
  asks.speculative.method = SpeculativeMethod::Ngram;
  const auto on = run(runner, config(SpeculativeMethod::Off), {asks});
  EXPECT_EQ(on.results[0].tokens, plain.results[0].tokens);
  EXPECT_GT(on.engine.speculation.num_accepted_tokens, 0);
  EXPECT_LT(on.results[0].num_events, plain.results[0].num_events) << "accepted drafts bring tokens together";
  Job declines = job;
  declines.speculative.num_speculative_tokens = 0;
  EXPECT_EQ(run(runner, config(SpeculativeMethod::Ngram), {declines}).engine.speculation.num_drafts, 0);
  Job two = asks;
  two.speculative.num_speculative_tokens = 2;
  const auto small = run(runner, config(SpeculativeMethod::Off), {two});
  EXPECT_EQ(small.results[0].tokens, plain.results[0].tokens);
  EXPECT_EQ(small.engine.speculation.accepted_per_position[2], 0);
  Job bad = job;
  bad.speculative.num_speculative_tokens = kMaxSpeculativeTokens + 1;
  Engine engine(runner, *tok_, config(SpeculativeMethod::Off));
  const auto refused = engine.submit({"bad", bad.prompt, bad.params, 0, Clock::now(), Clock::time_point::max(),
                                      std::nullopt, bad.speculative},
                                     [](const RequestOutput&) {});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->kind, ErrorKind::Invalid);
}

// Text unlike anything before it: drafts from chance matches keep missing, and drafting backs off.
TEST_F(SpeculativeDecoding, MissingDraftsBackOff) {
  test::FakeRunner runner(test::kTinyVocab, 1024, 16, 4096);  // no copying: the hash decides every token
  const auto jobs = repetitive_jobs(4, 7, 200);
  const auto got = expect_same_as_off(runner, config(SpeculativeMethod::Ngram, 4, 512, 8), jobs);
  const SpeculationStats& s = got.engine.speculation;
  EXPECT_LT(s.num_draft_tokens, 4 * 200 / 4) << "drafts kept coming although they missed";
}

// A request cancelled while its drafts are being verified (from its own callback, mid-step)
// ends with Abort and frees its blocks.
TEST_F(SpeculativeDecoding, CancelledDuringVerification) {
  test::FakeRunner runner(test::kTinyVocab, 64, 4, 4096);
  runner.set_copy_period(4);
  Engine engine(runner, *tok_, config(SpeculativeMethod::Ngram));
  Job job = repetitive_jobs(1, 8, 100)[0];
  std::optional<FinishReason> finish;
  int32_t tokens = 0;
  ASSERT_FALSE(engine.submit({"c", job.prompt, job.params}, [&](const RequestOutput& o) {
    tokens += int32_t(o.tokens.size());
    if (o.tokens.size() > 1 && !finish) engine.cancel("c");
    if (o.finish) finish = o.finish;
  }));
  while (engine.step()) {
  }
  EXPECT_EQ(finish, FinishReason::Abort);
  EXPECT_LT(tokens, 100);
  EXPECT_EQ(engine.stats().num_free_kv_blocks, engine.stats().num_kv_blocks);
}

// Row k's step is the step plain decoding would take after drafts 0 .. k-1: same uniform, same
// penalties; a draft the grammar refuses ends what the rows can assume.
TEST_F(SpeculativeDecoding, SamplerStepsFollowTheDrafts) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.seed = 3;
  p.frequency_penalty = 0.5f;
  RequestSampler ahead(p, {1, 2}, 0), plain(p, {1, 2}, 0);
  const std::vector<int32_t> drafts = {'x', 'y', 'x'};
  std::vector<SamplingStep> rows;
  ahead.append_steps(drafts, rows);
  ASSERT_EQ(rows.size(), 4u);
  for (size_t k = 0; k < rows.size(); ++k) {
    const SamplingStep want = plain.step();
    EXPECT_EQ(rows[k].row.uniform, want.row.uniform) << k;
    EXPECT_EQ(rows[k].adjusts.size(), want.adjusts.size()) << k;
    if (k < drafts.size()) plain.record(drafts[k]);
  }
  EXPECT_EQ(ahead.step().row.uniform, rows[0].row.uniform) << "append_steps() must not move the request's own state";
}

// A request drafts as many tokens as are likely enough to be kept (the k-th: p^k) to pay for their
// rows; misses lower p until it stops drafting, and p drifts back while it does not.
TEST(Speculator, DraftsWhatPaysAndRecoversAfterMisses) {
  SpeculativeConfig cfg;
  cfg.method = SpeculativeMethod::Ngram;
  Speculator spec(cfg);
  DraftState d = spec.start({});
  EXPECT_EQ(d.max_drafts, 7);
  std::vector<int32_t> text;
  for (int i = 0; i < 6; ++i) text.insert(text.end(), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  text.insert(text.end(), {1, 2, 3});
  d.acceptance = 0.6;
  EXPECT_EQ(spec.propose(d, text, 16, 0.25), (std::vector<int32_t>{4, 5}));  // 0.6, 0.36 >= 0.25 > 0.216
  EXPECT_EQ(spec.propose(d, text, 16, 0.0), (std::vector<int32_t>{4, 5, 6, 7, 8, 9, 10}));  // K caps it
  EXPECT_EQ(spec.propose(d, text, 3, 0.0).size(), 3u);  // and the step's limit
  for (int i = 0; i < 20; ++i) spec.observe(d, 2, 0);
  EXPECT_LT(d.acceptance, 0.25);
  int steps = 0;
  while (spec.propose(d, text, 16, 0.25).empty()) ASSERT_LT(++steps, 200);
  EXPECT_GT(steps, 10) << "it tried again at once";
  spec.observe(d, 1, 1);
  for (int i = 0; i < 10; ++i) spec.observe(d, 4, 4);
  EXPECT_GT(d.acceptance, 0.9);
  EXPECT_EQ(spec.stats().num_drafts, 31);
  EXPECT_EQ(spec.stats().num_accepted_tokens, 41);
  EXPECT_EQ(spec.stats().accepted_per_position[3], 10);
  DraftState off = spec.start({std::nullopt, 0});
  EXPECT_EQ(off.method, SpeculativeMethod::Off);
  EXPECT_TRUE(spec.propose(off, text, 16, 0.0).empty());
}

// The CPU forward pass is chunk invariant, so on a real (tiny, random) Llama the tokens and
// logprobs with drafts are the bits without them.
TEST_F(SpeculativeDecoding, TinyLlamaTokensAndLogprobsAreUnchanged) {
  test::TinyModelSpec spec;
  spec.matrix_type = kernels::DType::Q4_1;
  spec.embd_type = kernels::DType::Q8_0;
  const auto model = test::load_tiny_model(spec, "speculative");
  const auto runner = test::cpu_runner(*model, 256);
  auto jobs = repetitive_jobs(8, 9, 24);
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].params.logprobs = 2;
    if (i % 2) {
      jobs[i].params.temperature = 0.7f;
      jobs[i].params.seed = i;
    }
  }
  const auto got = expect_same_as_off(*runner, config(SpeculativeMethod::Suffix, 8, 64), jobs);
  EXPECT_GT(got.engine.speculation.num_draft_tokens, 0);
}

}  // namespace
}  // namespace flashserve
