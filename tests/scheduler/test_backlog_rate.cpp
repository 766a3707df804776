// BacklogRate on synthetic steps (no clock): the wait it predicts follows the rate at which a queue
// was worked off, and it predicts nothing before it has seen enough backlog.
#include "scheduler/backlog_rate.h"

#include <gtest/gtest.h>

#include <cmath>

namespace flashserve {
namespace {

// `seconds` of 50 ms steps, starting a request every `steps_per_start` of them.
void run(BacklogRate& r, double seconds, int steps_per_start) {
  for (int i = 0; i < int(seconds / 0.05); ++i) r.observe(0.05, i % steps_per_start == 0 ? 1 : 0);
}

TEST(BacklogRate, PredictsNothingBeforeEnoughBacklog) {
  BacklogRate r;
  EXPECT_EQ(r.predicted_wait(100), 0);
  run(r, 1.5, 1);
  EXPECT_EQ(r.predicted_wait(100), 0);
}

TEST(BacklogRate, WaitIsTheQueueOverTheRateItWasWorkedOff) {
  BacklogRate r;
  run(r, 10, 5);  // 4 starts a second
  EXPECT_NEAR(r.predicted_wait(8), 2.0, 0.05);
  EXPECT_NEAR(r.predicted_wait(40), 10.0, 0.25);
  EXPECT_EQ(r.predicted_wait(0), 0);
}

TEST(BacklogRate, FollowsAMachineThatSlowsDown) {
  BacklogRate r;
  run(r, 30, 2);   // 10 a second
  run(r, 120, 20);  // then 1 a second: six half-lives later the old rate is forgotten
  EXPECT_NEAR(r.predicted_wait(10), 10.0, 1.0);
}

TEST(BacklogRate, NoStartsInSecondsOfBacklogMeansAnyQueueWaitsForever) {
  BacklogRate r;
  for (int i = 0; i < 60; ++i) r.observe(0.05, 0);
  EXPECT_TRUE(std::isinf(r.predicted_wait(1)));
}

TEST(BacklogRate, IgnoresStepsWithoutADuration) {
  BacklogRate r;
  run(r, 10, 5);
  const double before = r.predicted_wait(8);
  r.observe(0, 100);
  r.observe(-1, 100);
  r.observe(std::nan(""), 100);
  EXPECT_EQ(r.predicted_wait(8), before);
}

}  // namespace
}  // namespace flashserve
