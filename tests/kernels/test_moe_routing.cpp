// MoE routing against a plain reference: std::sort for each token's choices, f64 softmax for the
// weights, and std::sort of (expert, assignment) pairs for the grouping.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/moe_routing.h"
#include "tests/kernels/reference.h"

namespace flashserve::test {
namespace {

using namespace kernels;

struct RefRouting {
  std::vector<int32_t> ids;
  std::vector<double> weights;
  std::vector<int32_t> offsets, sorted;
};

RefRouting ref_route(const std::vector<float>& logits, int64_t nt, int32_t ne, int32_t top_k, bool renormalize) {
  RefRouting r;
  for (int64_t t = 0; t < nt; ++t) {
    const float* row = logits.data() + t * ne;
    std::vector<int32_t> order(static_cast<size_t>(ne));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    const auto p = ref_softmax(row, ne);
    double picked = 0;
    for (int32_t j = 0; j < top_k; ++j) picked += p[order[j]];
    for (int32_t j = 0; j < top_k; ++j) {
      r.ids.push_back(order[j]);
      r.weights.push_back(renormalize ? p[order[j]] / picked : p[order[j]]);
    }
  }
  std::vector<std::pair<int32_t, int32_t>> by_expert;  // (expert, assignment)
  for (size_t a = 0; a < r.ids.size(); ++a) by_expert.emplace_back(r.ids[a], int32_t(a));
  std::sort(by_expert.begin(), by_expert.end());
  r.offsets.assign(size_t(ne) + 1, 0);
  for (const auto& [e, a] : by_expert) {
    ++r.offsets[e + 1];
    r.sorted.push_back(a);
  }
  for (int32_t e = 0; e < ne; ++e) r.offsets[e + 1] += r.offsets[e];
  return r;
}

// Logits on a coarse grid, so many experts of a token tie exactly; some rows also get the maximum
// repeated, so ties decide the first choice too.
std::vector<float> tied_logits(std::mt19937& rng, int64_t nt, int32_t ne) {
  std::uniform_int_distribution<int> grid(-12, 12);
  std::vector<float> x(size_t(nt * ne));
  for (float& v : x) v = 0.25f * float(grid(rng));
  for (int64_t t = 0; t < nt; t += 3)
    for (int32_t e = 0; e < ne; e += 5) x[t * ne + e] = 3.0f;
  return x;
}

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
  std::vector<int32_t> offsets, sorted;
};

Routed run_route(const std::vector<float>& logits, int64_t nt, int32_t ne, int32_t top_k, bool renormalize) {
  Routed r{std::vector<int32_t>(size_t(nt * top_k), -1), std::vector<float>(size_t(nt * top_k), NAN),
           std::vector<int32_t>(size_t(ne) + 1, -1), std::vector<int32_t>(size_t(nt * top_k), -1)};
  moe_route(logits.data(), nt, ne, top_k, renormalize,
            MoeRouting{r.ids.data(), r.weights.data(), r.offsets.data(), r.sorted.data()});
  return r;
}

TEST(MoeRoute, MatchesSortReferenceWithTies) {
  std::mt19937 rng(41);
  for (int32_t ne : {1, 8, 60, 64, 256}) {
    for (int32_t top_k : {1, 2, 8}) {
      if (top_k > ne) continue;
      for (int64_t nt : {1, 3, 17, 257, 1001}) {
        for (bool renormalize : {false, true}) {
          const std::string tag = "experts=" + std::to_string(ne) + " top_k=" + std::to_string(top_k) +
                                  " tokens=" + std::to_string(nt) + " renormalize=" + std::to_string(renormalize);
          const auto logits = (nt % 2) ? tied_logits(rng, nt, ne) : random_floats(rng, size_t(nt * ne), -4.0f, 4.0f);
          const auto got = run_route(logits, nt, ne, top_k, renormalize);
          const auto want = ref_route(logits, nt, ne, top_k, renormalize);
          ASSERT_EQ(got.ids, want.ids) << tag;
          ASSERT_EQ(got.offsets, want.offsets) << tag;
          ASSERT_EQ(got.sorted, want.sorted) << tag;
          for (size_t i = 0; i < got.weights.size(); ++i)
            ASSERT_NEAR(got.weights[i], want.weights[i], 1e-6) << tag << " weight " << i;
        }
      }
    }
  }
}

TEST(MoeRoute, RenormalizedWeightsSumToOneAndDescend) {
  std::mt19937 rng(42);
  const int64_t nt = 50;
  const int32_t ne = 64, top_k = 8;
  const auto got = run_route(random_floats(rng, size_t(nt * ne), -3.0f, 3.0f), nt, ne, top_k, true);
  for (int64_t t = 0; t < nt; ++t) {
    double sum = 0;
    for (int32_t j = 0; j < top_k; ++j) {
      sum += got.weights[t * top_k + j];
      if (j > 0) {
        ASSERT_LE(got.weights[t * top_k + j], got.weights[t * top_k + j - 1]) << "token " << t;
      }
    }
    ASSERT_NEAR(sum, 1.0, 1e-6) << "token " << t;
  }
}

TEST(MoeRoute, NoTokensGiveEmptyGroups) {
  const auto got = run_route({}, 0, 16, 2, true);
  EXPECT_EQ(got.offsets, std::vector<int32_t>(17, 0));
}

TEST(MoeRoute, RejectsBadArguments) {
  std::vector<float> logits(512);
  std::vector<int32_t> ids(16), offsets(300), sorted(16);
  std::vector<float> weights(16);
  const MoeRouting out{ids.data(), weights.data(), offsets.data(), sorted.data()};
  EXPECT_THROW(moe_route(logits.data(), 1, 0, 1, false, out), std::invalid_argument);
  EXPECT_THROW(moe_route(logits.data(), 1, kMoeMaxExperts + 1, 1, false, out), std::invalid_argument);
  EXPECT_THROW(moe_route(logits.data(), 1, 8, 0, false, out), std::invalid_argument);
  EXPECT_THROW(moe_route(logits.data(), 1, 4, 5, false, out), std::invalid_argument);
  EXPECT_THROW(moe_route(logits.data(), 1, 64, kMoeMaxTopK + 1, false, out), std::invalid_argument);
  EXPECT_THROW(moe_route(logits.data(), -1, 8, 2, false, out), std::invalid_argument);
  EXPECT_THROW(moe_route(logits.data(), int64_t(1) << 31, 8, 2, false, out), std::invalid_argument);
}

}  // namespace
}  // namespace flashserve::test
