// The reasoning budget as a request's sampler applies it: once the reasoning has run its budget
// without the close tag, only the close tag's tokens are allowed, one a step, then sampling is free
// again; an output that never opened its reasoning is left alone, and a close tag the model writes
// itself ends the count.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/sampling.h"
#include "scheduler/sampler.h"
#include "scheduler/sampling_params.h"

namespace flashserve {
namespace {

constexpr int32_t kVocab = 50;
constexpr int32_t kOpen = 40, kClose1 = 41, kClose2 = 42;
constexpr int32_t kFavourite = 7;  // the token every step's logits prefer

// One greedy step as the runner takes it, the mask applied.
int32_t next_token(RequestSampler& sampler) {
  const SamplingStep step = sampler.step();
  std::vector<float> logits(kVocab, 0.0f);
  logits[kFavourite] = 5.0f;
  kernels::SamplingRow row = step.row;
  row.mask_row = step.mask.empty() ? -1 : 0;
  int32_t token = -1;
  kernels::sample_rows(logits.data(), 1, kVocab, &row, step.adjusts.data(), step.mask.data(), &token);
  sampler.record(token);
  return token;
}

SamplingParams with_budget(int32_t max_tokens, bool starts_inside) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.reasoning_budget = ReasoningBudget{max_tokens, {kOpen}, {kClose1, kClose2}, starts_inside, kVocab};
  return p;
}

std::vector<int32_t> run(RequestSampler& sampler, int steps) {
  std::vector<int32_t> out;
  for (int i = 0; i < steps; ++i) out.push_back(next_token(sampler));
  return out;
}

TEST(ReasoningBudget, ForcesTheCloseTagOnceSpent) {
  RequestSampler inside(with_budget(3, /*starts_inside=*/true), {1, 2}, 1);
  const std::vector<int32_t> expected = {kFavourite, kFavourite, kFavourite, kClose1, kClose2, kFavourite, kFavourite};
  EXPECT_EQ(run(inside, 7), expected);

  RequestSampler zero(with_budget(0, true), {}, 1);
  EXPECT_EQ(run(zero, 3), (std::vector<int32_t>{kClose1, kClose2, kFavourite}));
}

TEST(ReasoningBudget, CountsFromTheOpenTagTheModelWrites) {
  RequestSampler sampler(with_budget(2, /*starts_inside=*/false), {}, 1);
  sampler.record(kOpen);  // the model opened its reasoning
  EXPECT_EQ(run(sampler, 5), (std::vector<int32_t>{kFavourite, kFavourite, kClose1, kClose2, kFavourite}));
}

TEST(ReasoningBudget, AnOutputThatDoesNotOpenWithTheTagIsLeftAlone) {
  RequestSampler sampler(with_budget(1, /*starts_inside=*/false), {}, 1);
  EXPECT_EQ(run(sampler, 6), std::vector<int32_t>(6, kFavourite));
}

TEST(ReasoningBudget, ACloseTagTheModelWritesEndsTheCount) {
  RequestSampler sampler(with_budget(4, /*starts_inside=*/true), {}, 1);
  sampler.record(3);
  sampler.record(kClose1);
  sampler.record(kClose2);  // closed by the model after 3 tokens
  EXPECT_EQ(run(sampler, 6), std::vector<int32_t>(6, kFavourite));
}

TEST(ReasoningBudget, ValidateChecksTheTagsAndTheVocabulary) {
  SamplingParams p = with_budget(3, true);
  EXPECT_EQ(validate(p, kVocab), std::nullopt);
  EXPECT_NE(validate(p, kVocab + 1), std::nullopt);  // built for another vocabulary
  p.reasoning_budget->close_ids = {};
  EXPECT_NE(validate(p, kVocab), std::nullopt);
  p = with_budget(3, true);
  p.reasoning_budget->close_ids = {kVocab};
  EXPECT_NE(validate(p, kVocab), std::nullopt);
  p = with_budget(-1, true);
  EXPECT_NE(validate(p, kVocab), std::nullopt);
}

}  // namespace
}  // namespace flashserve
