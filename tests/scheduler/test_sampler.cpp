// SamplingParams validation and sampling as a request sees it (RequestSampler's steps through the
// CPU sampling op): greedy, the tempered distribution and its top-k /
// top-p / min-p truncations (chi-square against the exact probabilities, p = 0.001 critical values),
// penalties and bias, seeding, and logprobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "kernels/sampling.h"
#include "scheduler/sampler.h"
#include "scheduler/sampling_params.h"

namespace flashserve {
namespace {

using Ids = std::vector<int32_t>;

// One step the way a runner takes it: the sampler's step, the CPU sampling op on a copy of the raw
// logits, logprobs from the raw logits when asked, and the token recorded back.
SampledToken sample(RequestSampler& sampler, const float* logits, int32_t vocab) {
  const SamplingStep step = sampler.step();
  std::vector<float> scratch(logits, logits + vocab);
  SampledToken t;
  kernels::sample_rows(scratch.data(), 1, vocab, &step.row, step.adjusts.data(), nullptr, &t.token);
  if (step.logprobs >= 0) kernels::token_logprobs(logits, vocab, t.token, step.logprobs, t.logprob, t.top_logprobs);
  sampler.record(t.token);
  return t;
}

// ---------------------------------------------------------------------------------------------
// validate()
constexpr int32_t kVocab = 100;

TEST(Validate, DefaultsAreValid) { EXPECT_EQ(validate(SamplingParams{}, kVocab), std::nullopt); }

TEST(Validate, BoundaryValuesAreValid) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.repetition_penalty = 0.01f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logit_bias = {{0, -100.0f}, {kVocab - 1, 100.0f}};
  p.logprobs = 20;
  p.max_tokens = 1;
  p.stop_token_ids = {0, kVocab - 1};
  p.stop = {"a", "b", "c", "d"};
  EXPECT_EQ(validate(p, kVocab), std::nullopt);
  p.min_p = 0.0f;
  p.logprobs = -1;
  p.top_p = 1e-6f;
  EXPECT_EQ(validate(p, kVocab), std::nullopt);
}

TEST(Validate, MessageStatesRuleAndValue) {
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_EQ(validate(p, kVocab), "top_p must be in (0, 1], got 1.5");
}

TEST(Validate, EachBadFieldIsNamed) {
  const float nan = std::nanf(""), inf = INFINITY;
  const std::vector<std::pair<std::string, std::function<void(SamplingParams&)>>> cases = {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
      {"temperature", [=](SamplingParams& p) { p.temperature = nan; }},
      {"temperature", [=](SamplingParams& p) { p.temperature = inf; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -1; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"top_p", [=](SamplingParams& p) { p.top_p = nan; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.1f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.01f; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; }},
      {"repetition_penalty", [=](SamplingParams& p) { p.repetition_penalty = inf; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.5f; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -2.01f; }},
      {"logit_bias", [](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }},
      {"logit_bias", [](SamplingParams& p) { p.logit_bias = {{kVocab, 1.0f}}; }},
      {"logit_bias", [](SamplingParams& p) { p.logit_bias = {{3, 100.5f}}; }},
      {"logit_bias", [=](SamplingParams& p) { p.logit_bias = {{3, nan}}; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = -2; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = 21; }},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }},
      {"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = {5, kVocab}; }},
      {"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = {-1}; }},
      {"stop", [](SamplingParams& p) { p.stop = {"a", "b", "c", "d", "e"}; }},
      {"stop", [](SamplingParams& p) { p.stop = {"a", ""}; }},
  };
  for (const auto& [field, corrupt] : cases) {
    SamplingParams p;
    corrupt(p);
    const std::optional<std::string> err = validate(p, kVocab);
    ASSERT_TRUE(err.has_value()) << field;
    EXPECT_EQ(err->rfind(field, 0), 0u) << "message should start with " << field << ": " << *err;
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers: exact probabilities, observed counts, and Pearson's chi-square between them.
std::vector<float> random_logits(int32_t vocab, float scale, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(vocab);
  for (float& l : logits) l = normal(rng);
  return logits;
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature = 1.0) {
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::exp((logits[i] - max) / temperature);
  const double sum = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& x : p) x /= sum;
  return p;
}

// Logits whose softmax is exactly `probs`.
std::vector<float> logits_for(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::vector<int> draw_counts(const SamplingParams& p, const std::vector<float>& logits, int draws) {
  RequestSampler sampler(p, {}, /*fallback_seed=*/12345);
  std::vector<int> counts(logits.size());
  const int32_t vocab = static_cast<int32_t>(logits.size());
  for (int i = 0; i < draws; ++i) ++counts[sample(sampler, logits.data(), vocab).token];
  return counts;
}

// Chi-square over the tokens in `support`, against `probs` renormalised over them. Fails the test if
// anything was drawn outside the support.
double chi_square(const std::vector<int>& counts, const std::vector<double>& probs, const Ids& support,
                  const char* name) {
  const int draws = std::accumulate(counts.begin(), counts.end(), 0);
  double mass = 0.0, chi2 = 0.0;
  int inside = 0;
  for (int32_t t : support) {
    mass += probs[t];
    inside += counts[t];
  }
  EXPECT_EQ(inside, draws) << name << ": drew tokens outside the support";
  for (int32_t t : support) {
    const double expected = draws * probs[t] / mass;
    chi2 += (counts[t] - expected) * (counts[t] - expected) / expected;
  }
  std::cout << "[ chi2     ] " << name << ": " << chi2 << " (" << support.size() - 1 << " dof)\n";
  return chi2;
}

// Critical chi-square values at p = 0.001, by degrees of freedom.
constexpr double kChi2Critical[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
constexpr int kDraws = 20000;

const std::vector<float> kEight = {0.5f, -1.0f, 2.0f, 0.1f, 1.2f, -0.3f, 0.8f, 0.0f};
// Probabilities 0.4 / 0.3 / 0.15 / 0.1 / 0.05, with the ranking scrambled across ids.
const std::vector<double> kFiveProbs = {0.1, 0.4, 0.05, 0.3, 0.15};

// ---------------------------------------------------------------------------------------------
TEST(Sampler, GreedyIsArgmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  RequestSampler sampler(p, {}, 1);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<float> logits = random_logits(1000, 2.0f, seed);
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(sample(sampler, logits.data(), 1000).token, best);
  }
  const std::vector<float> tie = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(sample(sampler, tie.data(), 4).token, 1);
}

TEST(Sampler, TemperatureSamplesTheSoftmax) {
  for (float t : {1.0f, 0.7f, 1.6f}) {
    SamplingParams p;
    p.temperature = t;
    const std::string name = "temperature " + std::to_string(t);
    const Ids all = {0, 1, 2, 3, 4, 5, 6, 7};
    EXPECT_LT(chi_square(draw_counts(p, kEight, kDraws), softmax(kEight, t), all, name.c_str()), kChi2Critical[7]);
  }
}

TEST(Sampler, TopKKeepsTheKBest) {
  SamplingParams p;
  p.top_k = 3;
  EXPECT_LT(chi_square(draw_counts(p, kEight, kDraws), softmax(kEight), {2, 4, 6}, "top_k 3"), kChi2Critical[2]);
  p.top_k = 1;
  EXPECT_EQ(draw_counts(p, kEight, 200)[2], 200);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  const std::vector<float> logits = logits_for(kFiveProbs);
  SamplingParams p;
  p.top_p = 0.75f;  // 0.4 + 0.3 < 0.75 <= 0.4 + 0.3 + 0.15
  EXPECT_LT(chi_square(draw_counts(p, logits, kDraws), kFiveProbs, {1, 3, 4}, "top_p 0.75"), kChi2Critical[2]);
  p.top_p = 0.6f;
  EXPECT_LT(chi_square(draw_counts(p, logits, kDraws), kFiveProbs, {1, 3}, "top_p 0.6"), kChi2Critical[1]);
  p.top_p = 0.01f;  // less than the best token alone: that token is still kept
  EXPECT_EQ(draw_counts(p, logits, 200)[1], 200);
}

TEST(Sampler, TopPMeasuresMassWithinTopK) {
  // Within the top 2, token 1 holds 0.4 / 0.7 = 0.57 >= 0.5 alone; over all five it would not.
  const std::vector<float> logits = logits_for(kFiveProbs);
  SamplingParams p;
  p.top_k = 2;
  p.top_p = 0.5f;
  EXPECT_EQ(draw_counts(p, logits, 500)[1], 500);
}

TEST(Sampler, MinPIsRelativeToTheBestToken) {
  const std::vector<float> logits = logits_for(kFiveProbs);
  SamplingParams p;
  p.min_p = 0.2f;  // keeps p >= 0.08
  EXPECT_LT(chi_square(draw_counts(p, logits, kDraws), kFiveProbs, {0, 1, 3, 4}, "min_p 0.2"), kChi2Critical[3]);
  p.min_p = 1.0f;
  EXPECT_EQ(draw_counts(p, logits, 200)[1], 200);
}

TEST(Sampler, TopPOverAFullVocabularyNeverLeavesTheNucleus) {
  // Flat enough that the nucleus runs to thousands of tokens, past the first partial sort.
  constexpr int32_t kV = 49152;
  const std::vector<float> logits = random_logits(kV, 2.5f, 7);
  const std::vector<double> probs = softmax(logits);
  Ids order(kV);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::set<int32_t> nucleus;
  double cumulative = 0.0;
  for (int32_t t : order) {
    nucleus.insert(t);
    cumulative += probs[t];
    if (cumulative >= 0.9) break;
  }
  ASSERT_GT(nucleus.size(), 1000u);
  std::cout << "nucleus of " << nucleus.size() << " tokens\n";
  SamplingParams p;
  p.top_p = 0.9f;
  RequestSampler sampler(p, {}, 3);
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(nucleus.count(sample(sampler, logits.data(), kV).token)) << i;
}

TEST(Sampler, TopKOverAFullVocabularyKeepsExactlyTheKBest) {
  // k beyond what the first candidate sweep finds, so the sweep has to widen.
  constexpr int32_t kV = 49152, kK = 3000;
  const std::vector<float> logits = random_logits(kV, 4.0f, 8);
  std::vector<float> sorted = logits;
  std::nth_element(sorted.begin(), sorted.begin() + (kK - 1), sorted.end(), std::greater<float>());
  const float kth = sorted[kK - 1];
  SamplingParams p;
  p.top_k = kK;
  p.temperature = 3.0f;  // flatten, so that draws reach deep into the kept set
  RequestSampler sampler(p, {}, 4);
  float lowest = INFINITY;
  for (int i = 0; i < 500; ++i) lowest = std::min(lowest, logits[sample(sampler, logits.data(), kV).token]);
  EXPECT_GE(lowest, kth);
}

TEST(Sampler, TinyTemperatureIsGreedyNotNaN) {
  SamplingParams p;
  p.temperature = 1e-30f;
  p.top_p = 0.9f;
  RequestSampler sampler(p, {}, 1);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sample(sampler, kEight.data(), 8).token, 2);
}

// ---------------------------------------------------------------------------------------------
// Penalties and bias, observed through greedy choices.
Ids greedy_run(const SamplingParams& base, const std::vector<float>& logits, const Ids& prompt, int steps) {
  SamplingParams p = base;
  p.temperature = 0.0f;
  RequestSampler sampler(p, prompt, 1);
  Ids out;
  const int32_t vocab = static_cast<int32_t>(logits.size());
  for (int i = 0; i < steps; ++i) out.push_back(sample(sampler, logits.data(), vocab).token);
  return out;
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  EXPECT_EQ(greedy_run(p, {2.0f, 1.5f}, {0}, 1), (Ids{1}));     // 2 / 1.5 = 1.33 < 1.5
  EXPECT_EQ(greedy_run(p, {-1.0f, -1.2f}, {0}, 1), (Ids{1}));   // -1 * 1.5 = -1.5 < -1.2
  EXPECT_EQ(greedy_run(p, {2.0f, 1.5f, 0.0f}, {2, 2}, 1), (Ids{0}));  // only tokens seen are penalised
  p.repetition_penalty = 1.2f;
  EXPECT_EQ(greedy_run(p, {2.0f, 1.5f}, {0}, 1), (Ids{0}));     // 2 / 1.2 = 1.67 > 1.5
}

TEST(Sampler, RepetitionPenaltyCoversOutputOnceRegardlessOfCount) {
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  // After 0 and 1 are both penalised once, 0 leads again for good: counts never compound.
  EXPECT_EQ(greedy_run(p, {2.0f, 1.5f}, {}, 5), (Ids{0, 1, 0, 0, 0}));
}

TEST(Sampler, FrequencyPenaltyGrowsWithCount) {
  SamplingParams p;
  p.frequency_penalty = 0.3f;
  // 0: 1.0, 0.7, 0.4 | 1: 0.5 -> 0.2 after one use.
  EXPECT_EQ(greedy_run(p, {1.0f, 0.5f}, {}, 5), (Ids{0, 0, 1, 0, 1}));
  p.frequency_penalty = -0.3f;  // a negative penalty encourages repeats
  EXPECT_EQ(greedy_run(p, {0.5f, 1.0f}, {}, 3), (Ids{1, 1, 1}));
}

TEST(Sampler, PresencePenaltyAppliesOnceAndIgnoresPrompt) {
  SamplingParams p;
  p.presence_penalty = 0.55f;
  // 0: 1.0 -> 0.45 | 1: 0.5 -> -0.05 | 2: 0.4. The prompt's 0 does not count.
  EXPECT_EQ(greedy_run(p, {1.0f, 0.5f, 0.4f}, {0}, 4), (Ids{0, 1, 0, 0}));
}

// The tokens bias and history touch, as the runner gets them: one entry per token, by id, kept as
// tokens are recorded.
TEST(Sampler, AdjustsListEachTouchedTokenOnceInOrder) {
  SamplingParams p;
  p.repetition_penalty = 1.2f;
  p.frequency_penalty = 0.5f;
  p.logit_bias = {{7, 2.0f}, {3, -1.0f}, {7, 1.0f}};
  RequestSampler sampler(p, {9, 3, 9, 5}, 1);
  for (int32_t t : {5, 11, 5}) sampler.record(t);
  const SamplingStep step = sampler.step();
  std::vector<std::tuple<int32_t, int32_t, int32_t, float>> got;  // token, output count, seen, bias
  for (const kernels::TokenAdjust& a : step.adjusts) got.emplace_back(a.token, a.output_count, a.seen, a.bias);
  using E = std::tuple<int32_t, int32_t, int32_t, float>;
  EXPECT_EQ(got, (std::vector<E>{E{3, 0, 1, -1.0f}, E{5, 2, 1, 0.0f}, E{7, 0, 0, 3.0f}, E{9, 0, 1, 0.0f}, E{11, 1, 1, 0.0f}}));
  EXPECT_EQ(step.row.adjust_begin, 0);
  EXPECT_EQ(step.row.adjust_end, 5);

  SamplingParams plain;  // no penalty: outputs touch nothing
  RequestSampler quiet(plain, {1, 2}, 1);
  quiet.record(4);
  EXPECT_TRUE(quiet.step().adjusts.empty());
}

TEST(Sampler, LogitBiasBansAndForces) {
  SamplingParams p;
  p.logit_bias = {{2, -100.0f}};
  EXPECT_EQ(draw_counts(p, kEight, 2000)[2], 0);
  p.logit_bias = {{1, 100.0f}};
  EXPECT_EQ(draw_counts(p, kEight, 2000)[1], 2000);
  p.logit_bias = {{1, 2.9f}};  // -1.0 + 2.9 = 1.9, still behind token 2's 2.0
  EXPECT_EQ(greedy_run(p, kEight, {}, 1), (Ids{2}));
  p.logit_bias = {{1, 3.1f}};  // 2.1: now ahead
  EXPECT_EQ(greedy_run(p, kEight, {}, 1), (Ids{1}));
}

// ---------------------------------------------------------------------------------------------
// Seeds
Ids sampled_run(const SamplingParams& p, uint64_t fallback_seed, int steps) {
  const std::vector<float> logits = random_logits(1000, 1.0f, 99);
  RequestSampler sampler(p, {}, fallback_seed);
  Ids out;
  for (int i = 0; i < steps; ++i) out.push_back(sample(sampler, logits.data(), 1000).token);
  return out;
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.top_p = 0.95f;
  p.frequency_penalty = 0.5f;
  EXPECT_EQ(sampled_run(p, 42, 300), sampled_run(p, 42, 300));
  EXPECT_NE(sampled_run(p, 42, 300), sampled_run(p, 43, 300));
}

TEST(Sampler, ExplicitSeedOverridesFallback) {
  SamplingParams p;
  p.seed = 7;
  EXPECT_EQ(sampled_run(p, 1, 100), sampled_run(p, 2, 100));
  SamplingParams unseeded;
  EXPECT_EQ(sampled_run(p, 1, 100), sampled_run(unseeded, 7, 100));
}

// ---------------------------------------------------------------------------------------------
// Logprobs
std::vector<double> log_softmax(const std::vector<float>& logits) {
  std::vector<double> lp = softmax(logits);
  for (double& x : lp) x = std::log(x);
  return lp;
}

TEST(Sampler, LogprobsAreRawLogSoftmaxWithSortedTopList) {
  const std::vector<float> logits = random_logits(5000, 2.0f, 11);
  const std::vector<double> reference = log_softmax(logits);
  SamplingParams p;
  p.logprobs = 5;
  p.temperature = 0.5f;              // none of these may change the reported numbers
  p.logit_bias = {{17, 30.0f}};
  p.repetition_penalty = 2.0f;
  RequestSampler sampler(p, {1, 2, 3}, 5);
  for (int step = 0; step < 3; ++step) {
    const SampledToken s = sample(sampler, logits.data(), 5000);
    EXPECT_EQ(s.token, 17);
    EXPECT_NEAR(s.logprob, reference[17], 1e-4);
    ASSERT_EQ(s.top_logprobs.size(), 5u);
    Ids expected_top(5000);
    std::iota(expected_top.begin(), expected_top.end(), 0);
    std::partial_sort(expected_top.begin(), expected_top.begin() + 5, expected_top.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    for (size_t i = 0; i < 5; ++i) {
      EXPECT_EQ(s.top_logprobs[i].first, expected_top[i]);
      EXPECT_NEAR(s.top_logprobs[i].second, reference[expected_top[i]], 1e-4);
    }
  }
}

TEST(Sampler, LogprobsCountsAndAbsence) {
  SamplingParams p;
  p.logprobs = 0;  // the sampled token's logprob, no list
  RequestSampler first(p, {}, 1);
  SampledToken s = sample(first, kEight.data(), 8);
  EXPECT_TRUE(s.top_logprobs.empty());
  EXPECT_NEAR(s.logprob, log_softmax(kEight)[s.token], 1e-5);
  p.logprobs = 20;  // more than the vocabulary: all of it, best first
  RequestSampler all(p, {}, 1);
  s = sample(all, kEight.data(), 8);
  ASSERT_EQ(s.top_logprobs.size(), 8u);
  EXPECT_EQ(s.top_logprobs.front().first, 2);
  for (size_t i = 1; i < 8; ++i) EXPECT_GE(s.top_logprobs[i - 1].second, s.top_logprobs[i].second);
  p.logprobs = -1;
  RequestSampler none(p, {}, 1);
  s = sample(none, kEight.data(), 8);
  EXPECT_TRUE(s.top_logprobs.empty());
  EXPECT_EQ(s.logprob, 0.0f);
}

}  // namespace
}  // namespace flashserve
