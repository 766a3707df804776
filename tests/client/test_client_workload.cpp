// Synthetic workloads are reproducible and within their length ranges; arrivals keep their rate.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <sstream>

#include "client/arrival.h"
#include "client/workload.h"

namespace fb = flashserve::bench;

using fb::word_count;

TEST(Workload, SameSeedSameRequests) {
  const fb::WorkloadOptions o{.num_requests = 20, .input_len = 32, .output_len = 16, .range_ratio = 0.5, .seed = 7};
  const auto a = fb::make_synthetic_workload(o), b = fb::make_synthetic_workload(o);
  ASSERT_EQ(a.size(), 20u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].output_len, b[i].output_len);
  }
  fb::WorkloadOptions other = o;
  other.seed = 8;
  EXPECT_NE(fb::make_synthetic_workload(other)[0].prompt, a[0].prompt);
}

TEST(Workload, FixedLengthsWithoutRange) {
  for (const auto& r : fb::make_synthetic_workload({.num_requests = 5, .input_len = 12, .output_len = 3})) {
    EXPECT_EQ(r.input_len, 12);
    EXPECT_EQ(word_count(r.prompt), 12);
    EXPECT_EQ(r.output_len, 3);
  }
}

TEST(Workload, LengthsStayInTheirRangeAndCoverIt) {
  const auto requests = fb::make_synthetic_workload(
      {.num_requests = 2000, .input_len = 100, .output_len = 40, .range_ratio = 0.5, .seed = 1});
  int32_t in_min = 1 << 30, in_max = 0, out_min = 1 << 30, out_max = 0;
  for (const auto& r : requests) {
    EXPECT_EQ(word_count(r.prompt), r.input_len);
    in_min = std::min(in_min, r.input_len), in_max = std::max(in_max, r.input_len);
    out_min = std::min(out_min, r.output_len), out_max = std::max(out_max, r.output_len);
  }
  EXPECT_EQ(in_min, 50);
  EXPECT_EQ(in_max, 150);
  EXPECT_EQ(out_min, 20);
  EXPECT_EQ(out_max, 60);
}

TEST(Workload, RangeNeverGoesBelowOne) {
  EXPECT_EQ(fb::length_range(1, 0.9), std::make_pair(1, 2));
  EXPECT_EQ(fb::length_range(10, 0.0), std::make_pair(10, 10));
}

TEST(Workload, RejectsBadOptions) {
  EXPECT_THROW(fb::make_synthetic_workload({.input_len = 0}), std::invalid_argument);
  EXPECT_THROW(fb::make_synthetic_workload({.range_ratio = 1.0}), std::invalid_argument);
}

namespace {

// Mean and coefficient of variation of `n` gaps.
std::pair<double, double> gap_stats(fb::ArrivalProcess& p, int n) {
  std::vector<double> gaps(static_cast<size_t>(n));
  for (double& g : gaps) g = p.next_gap_s();
  const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / n;
  double var = 0;
  for (double g : gaps) var += (g - mean) * (g - mean);
  return {mean, std::sqrt(var / n) / mean};
}

}  // namespace

// 100k exponential gaps: the sample mean's relative standard error is 0.3%, so 2% is > 6 sigma.
TEST(Arrival, PoissonKeepsTheRate) {
  fb::ArrivalProcess p(/*rate=*/8.0, /*burstiness=*/1.0, /*seed=*/3);
  const auto [mean, cv] = gap_stats(p, 100000);
  EXPECT_NEAR(1.0 / mean, 8.0, 8.0 * 0.02);
  EXPECT_NEAR(cv, 1.0, 0.03);  // exponential: standard deviation = mean
}

// Gamma gaps with shape k have CV 1/sqrt(k): bursty below 1, smoother above, same mean rate.
TEST(Arrival, BurstinessChangesSpreadNotRate) {
  for (double k : {0.25, 4.0}) {
    fb::ArrivalProcess p(2.0, k, 11);
    const auto [mean, cv] = gap_stats(p, 100000);
    EXPECT_NEAR(1.0 / mean, 2.0, 2.0 * 0.03) << "burstiness " << k;
    EXPECT_NEAR(cv, 1.0 / std::sqrt(k), 0.05 / std::sqrt(k)) << "burstiness " << k;
  }
}

TEST(Arrival, InfiniteRateSendsAtOnce) {
  fb::ArrivalProcess p(INFINITY, 1.0, 0);
  EXPECT_TRUE(p.unbounded());
  EXPECT_EQ(p.next_gap_s(), 0.0);
}

TEST(Arrival, RejectsNonPositiveRate) {
  EXPECT_THROW(fb::ArrivalProcess(0.0, 1.0, 0), std::invalid_argument);
  EXPECT_THROW(fb::ArrivalProcess(1.0, 0.0, 0), std::invalid_argument);
}

TEST(Workload, SharedPrefixIsTheSameFirstWordsAndDeterministic) {
  const fb::WorkloadOptions o{.num_requests = 8, .input_len = 10, .output_len = 4, .seed = 5, .shared_prefix_len = 20};
  const auto a = fb::make_synthetic_workload(o), b = fb::make_synthetic_workload(o);
  auto first_words = [](const std::string& s, int n) {
    std::istringstream in(s);
    std::string out;
    for (std::string w; n-- > 0 && in >> w;) out += w + ' ';
    return out;
  };
  const std::string prefix = first_words(a[0].prompt, 20);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(first_words(a[i].prompt, 20), prefix) << i;
    EXPECT_EQ(word_count(a[i].prompt), 30);
    EXPECT_EQ(a[i].input_len, 30);
    EXPECT_EQ(a[i].prompt, b[i].prompt);
  }
  EXPECT_NE(a[0].prompt, a[1].prompt) << "the part after the prefix is each prompt's own";
  // The random parts are those of the same workload without a prefix.
  fb::WorkloadOptions plain = o;
  plain.shared_prefix_len = 0;
  EXPECT_TRUE(a[3].prompt.ends_with(fb::make_synthetic_workload(plain)[3].prompt));
  EXPECT_THROW(fb::make_synthetic_workload({.shared_prefix_len = -1}), std::invalid_argument);
}
