// Requests with a grammar through the engine: every finished text is a sentence of the grammar
// (whatever the model prefers and however it is sampled), a cut-off one a prefix of one, and the
// unconstrained requests batched beside them produce exactly what they produce alone.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "scheduler/grammar_vocabulary.h"
#include "tests/util/engine_harness.h"
#include "tests/util/fake_runner.h"

namespace flashserve {
namespace {

using test::Job;

constexpr int32_t kVocab = 261;

const char* kRecord = R"(
root ::= "{\"id\": " [1-9] [0-9]{0,3} ", \"tags\": [" (tag (", " tag){0,3})? "], \"ok\": " ("true" | "false") "}"
tag ::= "\"" [a-z]{1,8} "\""
)";

class ConstrainedDecoding : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = test::tiny_tokenizer().release(); }
  static void TearDownTestSuite() { delete tok_; }

  std::shared_ptr<const grammar::CompiledGrammar> compile(const char* gbnf) {
    return std::make_shared<const grammar::CompiledGrammar>(grammar::parse_gbnf(gbnf), grammar_vocabulary(*tok_, kVocab));
  }
  EngineConfig config() {
    EngineConfig c;
    c.scheduler.max_num_seqs = 8;
    c.scheduler.max_num_batched_tokens = 64;
    return c;
  }
  static bool complete(const grammar::CompiledGrammar& g, const std::string& text) {
    grammar::Matcher m(g.grammar_ptr());
    return m.advance(text) && m.can_end();
  }
  static bool prefix(const grammar::CompiledGrammar& g, const std::string& text) {
    return grammar::Matcher(g.grammar_ptr()).advance(text);
  }

  static Tokenizer* tok_;
};
Tokenizer* ConstrainedDecoding::tok_ = nullptr;

TEST_F(ConstrainedDecoding, EveryFinishedTextIsASentence) {
  const auto g = compile(kRecord);
  std::vector<Job> jobs;
  for (int i = 0; i < 24; ++i) {
    Job j;
    j.prompt = {int32_t('a' + i % 20), int32_t('0' + i % 10)};
    j.params.temperature = i % 3 == 0 ? 0.0f : 1.5f;
    j.params.seed = uint64_t(i);
    j.params.max_tokens = 200;
    j.params.grammar = g;
    jobs.push_back(j);
  }
  test::FakeRunner runner(kVocab, 256, 4, 512);
  const test::RunStats run = test::run_jobs(runner, *tok_, config(), jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const test::JobResult& r = run.results[i];
    EXPECT_EQ(r.finish, FinishReason::Stop) << "job " << i << ": " << r.text;
    EXPECT_TRUE(complete(*g, r.text)) << "job " << i << ": " << r.text;
  }
}

TEST_F(ConstrainedDecoding, ACutOffTextIsAPrefixOfASentence) {
  const auto g = compile(kRecord);
  Job j;
  j.prompt = {'x'};
  j.params.temperature = 1.0f;
  j.params.seed = 5;
  j.params.max_tokens = 9;
  j.params.grammar = g;
  test::FakeRunner runner(kVocab, 64, 4, 512);
  const test::RunStats run = test::run_jobs(runner, *tok_, config(), {j});
  EXPECT_EQ(run.results[0].finish, FinishReason::Length);
  EXPECT_EQ(run.results[0].tokens.size(), 9u);
  EXPECT_TRUE(prefix(*g, run.results[0].text)) << run.results[0].text;
  EXPECT_FALSE(complete(*g, run.results[0].text));
}

TEST_F(ConstrainedDecoding, UnconstrainedNeighboursAreUntouched) {
  std::vector<Job> plain;
  for (int i = 0; i < 6; ++i) {
    Job j;
    j.prompt = {int32_t('k' + i)};
    j.params = test::greedy(40);
    plain.push_back(j);
  }
  test::FakeRunner alone_runner(kVocab, 256, 4, 512);
  const test::RunStats alone = test::run_jobs(alone_runner, *tok_, config(), plain);
  std::vector<Job> mixed;
  const auto g = compile(kRecord);
  for (const Job& j : plain) {
    mixed.push_back(j);
    Job c = j;
    c.params.ignore_eos = false;
    c.params.max_tokens = 200;
    c.params.grammar = g;
    mixed.push_back(c);
  }
  test::FakeRunner mixed_runner(kVocab, 256, 4, 512);
  const test::RunStats together = test::run_jobs(mixed_runner, *tok_, config(), mixed);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(together.results[2 * i].tokens, alone.results[i].tokens) << "job " << i;
    EXPECT_TRUE(complete(*g, together.results[2 * i + 1].text)) << together.results[2 * i + 1].text;
  }
}

TEST_F(ConstrainedDecoding, IgnoreEosWithAGrammarIsRefused) {
  SamplingParams p;
  p.grammar = compile(kRecord);
  p.ignore_eos = true;
  EXPECT_EQ(validate(p, kVocab), "ignore_eos cannot be combined with a grammar or response_format");
}

}  // namespace
}  // namespace flashserve
