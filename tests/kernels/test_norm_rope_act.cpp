#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"
#include "kernels/swiglu.h"
#include "tests/kernels/reference.h"

namespace flashserve::test {
namespace {

using namespace kernels;

TEST(RmsNorm, MatchesReferenceAndAllowsAliasing) {
  std::mt19937 rng(31);
  for (int64_t rows : {1, 3, 7}) {
    for (int64_t dim : {1, 5, 16, 64, 100, 576}) {
      auto x = random_floats(rng, size_t(rows * dim), -4.0f, 4.0f);
      const auto w = random_floats(rng, size_t(dim), 0.5f, 1.5f);
      const auto ref = ref_rmsnorm(x.data(), w.data(), rows, dim, 1e-5f);
      std::vector<float> y(x.size());
      rmsnorm(x.data(), w.data(), y.data(), rows, dim, 1e-5f);
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_NEAR(y[i], ref[i], 2e-6 * std::fabs(ref[i]) + 1e-30) << "rows=" << rows << " dim=" << dim << " i=" << i;
      rmsnorm(x.data(), w.data(), x.data(), rows, dim, 1e-5f);
      ASSERT_EQ(std::memcmp(x.data(), y.data(), y.size() * 4), 0) << "in place differs";
    }
  }
}

TEST(RmsNorm, EpsilonDominatesTinyRows) {
  std::vector<float> x(8, 1e-6f), w(8, 1.0f), y(8);
  rmsnorm(x.data(), w.data(), y.data(), 1, 8, 1e-2f);
  EXPECT_NEAR(y[0], 1e-6 / std::sqrt(1e-12 + 1e-2), 1e-11);
}

// The fused op must be exactly "x += residual; rmsnorm(x)": x bit for bit (the add is exact IEEE
// addition) and y bit for bit (the same reduction order), plus the f64 norm of the summed row.
TEST(AddRmsNorm, EqualsAddThenRmsNormBitForBit) {
  std::mt19937 rng(35);
  for (int64_t rows : {1, 3, 7, 40}) {
    for (int64_t dim : {1, 5, 16, 64, 100, 576, 1000}) {
      const auto x0 = random_floats(rng, size_t(rows * dim), -4.0f, 4.0f);
      const auto res = random_floats(rng, x0.size(), -4.0f, 4.0f);
      const auto w = random_floats(rng, size_t(dim), 0.5f, 1.5f);
      auto summed = x0;
      for (size_t i = 0; i < summed.size(); ++i) summed[i] += res[i];
      std::vector<float> want(x0.size()), y(x0.size());
      rmsnorm(summed.data(), w.data(), want.data(), rows, dim, 1e-5f);

      auto x = x0;
      add_rmsnorm(x.data(), res.data(), w.data(), y.data(), rows, dim, 1e-5f);
      const std::string tag = "rows=" + std::to_string(rows) + " dim=" + std::to_string(dim);
      ASSERT_EQ(std::memcmp(x.data(), summed.data(), x.size() * 4), 0) << tag << ": x is not x + residual";
      ASSERT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0) << tag << ": y differs from rmsnorm";
      const auto ref = ref_rmsnorm(summed.data(), w.data(), rows, dim, 1e-5f);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 2e-6 * std::fabs(ref[i]) + 1e-30) << tag;
    }
  }
}

struct RopeCase {
  int64_t heads, head_dim;
  int32_t rot_dim;
  float base, freq_scale;
  bool factors;
};

// Angles pos * freq_scale * base^(-2i/rot_dim) / factor_i rotate adjacent pairs (x[2i], x[2i+1]).
TEST(Rope, MatchesReferenceAndLeavesUnrotatedDims) {
  std::mt19937 rng(32);
  const std::vector<int32_t> positions = {0, 1, 17, 255, 4095, 30000, 3};
  const RopeCase cases[] = {{3, 64, 64, 10000.0f, 1.0f, false}, {2, 64, 32, 10000.0f, 1.0f, false},
                            {4, 10, 6, 500000.0f, 0.25f, true}, {1, 128, 128, 100000.0f, 1.0f, true}};
  for (const RopeCase& c : cases) {
    const int64_t nt = int64_t(positions.size());
    const auto x0 = random_floats(rng, size_t(nt * c.heads * c.head_dim), -2.0f, 2.0f);
    const auto factors = random_floats(rng, size_t(c.rot_dim / 2), 1.0f, 8.0f);
    RopeParams p{c.rot_dim, c.base, c.freq_scale, c.factors ? factors.data() : nullptr};
    auto x = x0;
    rope(x.data(), positions.data(), nt, c.heads, c.head_dim, p);
    for (int64_t t = 0; t < nt; ++t) {
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t base = (t * c.heads + h) * c.head_dim;
        for (int64_t i = 0; i < c.rot_dim / 2; ++i) {
          double theta = c.freq_scale * std::pow(double(c.base), -2.0 * double(i) / c.rot_dim);
          if (c.factors) theta /= factors[i];
          const double a = positions[t] * theta;
          const double u = x0[base + 2 * i], v = x0[base + 2 * i + 1];
          const double tol = 1e-6 * (std::fabs(u) + std::fabs(v));
          ASSERT_NEAR(x[base + 2 * i], u * std::cos(a) - v * std::sin(a), tol) << "t=" << t << " i=" << i;
          ASSERT_NEAR(x[base + 2 * i + 1], u * std::sin(a) + v * std::cos(a), tol) << "t=" << t << " i=" << i;
        }
        for (int64_t d = c.rot_dim; d < c.head_dim; ++d) ASSERT_EQ(x[base + d], x0[base + d]) << "dim " << d;
      }
    }
  }
}

TEST(Rope, FirstPairRotatesByPosition) {
  // Pair 0 has theta 1: (1, 0) at position 2 becomes (cos 2, sin 2); pair 1 is not mixed in.
  std::vector<float> x = {1.0f, 0.0f, 5.0f, 7.0f};
  const int32_t pos = 2;
  rope(x.data(), &pos, 1, 1, 4, RopeParams{2});
  EXPECT_FLOAT_EQ(x[0], std::cos(2.0f));
  EXPECT_FLOAT_EQ(x[1], std::sin(2.0f));
  EXPECT_EQ(x[2], 5.0f);
  EXPECT_EQ(x[3], 7.0f);
  EXPECT_THROW(rope(x.data(), &pos, 1, 1, 4, RopeParams{3}), std::invalid_argument);
}

TEST(Swiglu, MatchesReferenceAcrossRange) {
  std::mt19937 rng(33);
  for (int64_t n : {1, 7, 33, 1536, 10000}) {
    auto gate = random_floats(rng, size_t(n), -30.0f, 30.0f);
    const auto up = random_floats(rng, size_t(n), -3.0f, 3.0f);
    if (n > 7) { gate[0] = -100.0f; gate[1] = 100.0f; gate[2] = 0.0f; gate[3] = -87.5f; gate[4] = 1e-3f; }
    std::vector<float> out(static_cast<size_t>(n));
    swiglu(gate.data(), up.data(), out.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double ref = ref_silu_mul(gate[i], up[i]);
      ASSERT_NEAR(out[i], ref, 1e-6 * std::fabs(ref) + 1e-37) << "n=" << n << " gate=" << gate[i];
    }
    // In place over gate, and lane position must not matter: a shifted span gives the same bits.
    std::vector<float> g2 = gate;
    swiglu(g2.data(), up.data(), g2.data(), n);
    ASSERT_EQ(std::memcmp(g2.data(), out.data(), size_t(n) * 4), 0);
    if (n > 3) {
      std::vector<float> shifted(size_t(n - 3));
      swiglu(gate.data() + 3, up.data() + 3, shifted.data(), n - 3);
      ASSERT_EQ(std::memcmp(shifted.data(), out.data() + 3, size_t(n - 3) * 4), 0);
    }
  }
}

TEST(Softmax, MatchesReferenceWithLargeLogits) {
  std::mt19937 rng(34);
  for (int64_t n : {1, 7, 100, 49152}) {
    for (float offset : {0.0f, 1e4f, -1e4f}) {
      const int64_t rows = n > 1000 ? 2 : 3;
      auto x = random_floats(rng, size_t(rows * n), offset - 20.0f, offset + 20.0f);
      const auto x0 = x;
      softmax(x.data(), rows, n);
      for (int64_t r = 0; r < rows; ++r) {
        const auto ref = ref_softmax(x0.data() + r * n, n);
        double sum = 0;
        for (int64_t i = 0; i < n; ++i) {
          // Inputs near 1e4 carry only ~1e-3 absolute precision, so compare against the f64 softmax
          // of the same f32 inputs.
          ASSERT_NEAR(x[r * n + i], ref[i], 1e-5 * ref[i] + 1e-30) << "n=" << n << " offset=" << offset;
          sum += x[r * n + i];
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
    }
  }
}

TEST(Softmax, NegativeInfinityGetsZero) {
  std::vector<float> x = {1.0f, -INFINITY, 1.0f, -INFINITY, -INFINITY};
  softmax(x.data(), 1, 5);
  EXPECT_FLOAT_EQ(x[0], 0.5f);
  EXPECT_FLOAT_EQ(x[2], 0.5f);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_EQ(x[4], 0.0f);
}

}  // namespace
}  // namespace flashserve::test
