// StepBudget on synthetic step timings (no clock): the cap follows the fitted cost model and applies
// only while requests stream tokens.
#include "scheduler/step_budget.h"

#include <gtest/gtest.h>

#include <limits>

namespace flashserve {
namespace {

// Steps of a machine where a step costs 8 ms plus 2 ms per token.
void feed(StepBudget& b, std::initializer_list<int32_t> sizes) {
  for (int32_t t : sizes) b.observe(t, 0.008 + 0.002 * t);
}

TEST(StepBudget, CapFollowsTheFittedCost) {
  StepBudget b(0.1, 0, 512);
  feed(b, {512, 1, 1, 16, 300, 4});
  double fixed = 0, per_token = 0;
  ASSERT_TRUE(b.fitted(fixed, per_token));
  EXPECT_NEAR(fixed, 0.008, 1e-9);
  EXPECT_NEAR(per_token, 0.002, 1e-12);
  EXPECT_EQ(b.next(4), 46);  // (100 - 8) / 2
}

// One more row costs 2 ms; a lone decode step 10 ms a token, four decoding together 4 ms a token.
TEST(StepBudget, DraftThresholdIsARowsShareOfAToken) {
  StepBudget b(0.1, 0, 512);
  EXPECT_EQ(b.draft_threshold(1, 0.25), 0.25);  // nothing fitted yet
  feed(b, {512, 1, 1, 16, 300, 4});
  EXPECT_NEAR(b.draft_threshold(1, 0.25), 0.2, 1e-9);
  EXPECT_NEAR(b.draft_threshold(4, 0.25), 0.5, 1e-9);
  EXPECT_GT(b.draft_threshold(64, 0.25), 0.94);  // a wide batch: a draft must nearly always be kept
  EXPECT_EQ(b.draft_threshold(0, 0.25), 0.25);
}

TEST(StepBudget, NoCapWithoutStreamsTargetOrData) {
  StepBudget b(0.1, 0, 512);
  EXPECT_EQ(b.next(4), 512);  // nothing observed
  feed(b, {1, 1, 1});
  EXPECT_EQ(b.next(4), 512);  // one step size: the slope is unknown
  feed(b, {512});
  EXPECT_LT(b.next(4), 512);
  EXPECT_EQ(b.next(0), 512);  // nobody streams: a lone prompt runs at full speed
  StepBudget off(0, 0, 512);
  feed(off, {1, 512, 64});
  EXPECT_EQ(off.next(16), 512);
}

// A target shorter than the fixed cost still leaves every stream its token and prompts some room;
// a target the whole budget fits in takes it all.
TEST(StepBudget, FloorAndCeiling) {
  StepBudget tight(0.005, 0, 512, 16);
  feed(tight, {1, 512, 64, 8});
  EXPECT_EQ(tight.next(10), 26);
  StepBudget loose(10.0, 0, 512);
  feed(loose, {1, 512});
  EXPECT_EQ(loose.next(10), 512);
}

// The fit follows a machine that slows down: recent steps weigh most.
TEST(StepBudget, RecentStepsWeighMost) {
  StepBudget b(0.1, 0, 512);
  feed(b, {1, 512, 1, 512});
  for (int i = 0; i < 200; ++i) b.observe(i % 2 ? 1 : 256, i % 2 ? 0.016 : 0.016 + 0.004 * 256);
  double fixed = 0, per_token = 0;
  ASSERT_TRUE(b.fitted(fixed, per_token));
  EXPECT_NEAR(per_token, 0.004, 2e-4);
  EXPECT_NEAR(b.next(2), (0.1 - 0.016) / 0.004, 2);
}

// The decode ratio bounds a step by the decode-only step of the streams at hand: with 8 ms fixed and
// 2 ms a token, 4 streams decode in 16 ms, so 2.1 times that (33.6 ms) fits 12 tokens; the absolute
// target, when shorter, still wins, and either bound works alone.
TEST(StepBudget, DecodeRatioBoundsTheStep) {
  StepBudget ratio_only(0, 2.1, 512, 4);
  feed(ratio_only, {512, 1, 1, 16, 300, 4});
  EXPECT_EQ(ratio_only.next(4), 12);
  EXPECT_EQ(ratio_only.next(40), 88);  // (2.1 * 88 - 8) / 2
  EXPECT_EQ(ratio_only.next(0), 512);
  StepBudget both(0.1, 2.1, 512, 4);
  feed(both, {512, 1, 1, 16, 300, 4});
  EXPECT_EQ(both.next(4), 12);   // 33.6 ms < 100 ms
  EXPECT_EQ(both.next(40), 46);  // 184.8 ms > 100 ms: (100 - 8) / 2
  StepBudget one_step(0, 1.0, 512, 4);
  feed(one_step, {512, 1, 1, 16, 300, 4});
  EXPECT_EQ(one_step.next(4), 8);  // one decode step leaves no room: the streams plus min_tokens
}

TEST(StepBudget, IgnoresNonsense) {
  StepBudget b(0.1, 0, 512);
  b.observe(0, 1.0);
  b.observe(10, -1.0);
  b.observe(10, std::numeric_limits<double>::quiet_NaN());
  double fixed = 0, per_token = 0;
  EXPECT_FALSE(b.fitted(fixed, per_token));
  EXPECT_EQ(b.next(3), 512);
}

}  // namespace
}  // namespace flashserve
