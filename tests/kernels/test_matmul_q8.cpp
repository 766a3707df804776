// matmul_q8: 8-bit activations and integer dots. Checked bit for bit against a plain transcription of
// its contract (quantize each 32-block to nearest even, exact lane sums of four products, one fma per
// lane and block, a fixed lane reduction plus the offset term), for batch and thread invariance, and
// against the f64 product within the rounding 8-bit activations bring.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/threads.h"
#include "tests/kernels/quant_inputs.h"
#include "tests/kernels/reference.h"

namespace flashserve::test {
namespace {

using namespace kernels;

constexpr DType kTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1};

std::vector<float> run_q8(const std::vector<float>& x, int64_t nt, int64_t k, const std::vector<uint8_t>& w, DType t,
                          int64_t n_out) {
  std::vector<float> y(size_t(nt * n_out), NAN);
  matmul_q8(x.data(), nt, k, w.data(), t, n_out, y.data());
  return y;
}

float f16(const uint8_t* p) { return float(ref_half(read_u16(p))); }

// The contract, written out with no vectors: per block, eight exact lane sums scaled into the even
// or the odd blocks' float lanes, the offset term (a multiple of d * sum q) into its own sum.
float plain_dot(const float* x, const uint8_t* row, int64_t k, DType t) {
  float lanes[2][8] = {}, off = 0.0f;
  const size_t bb = size_t(block_bytes(t));
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    const uint8_t* wb = row + size_t(b) * bb;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32], sum = 0;
    for (int i = 0; i < 32; ++i) {
      const float v = xb[i] * id;
      q[i] = std::isnan(v) ? 0 : int(std::nearbyint(std::clamp(v, -127.0f, 127.0f)));
      sum += q[i];
    }
    const float s = d * float(sum);
    int code[32];
    const float scale = f16(wb);
    if (t == DType::Q8_0) {
      for (int e = 0; e < 32; ++e) code[e] = int8_t(wb[2 + e]);
    } else {
      const uint8_t* qs = wb + (t == DType::Q4_0 ? 2 : 4);
      for (int e = 0; e < 16; ++e) {
        code[e] = qs[e] & 0x0f;
        code[e + 16] = qs[e] >> 4;
      }
      off = std::fma(t == DType::Q4_0 ? -8.0f * scale : f16(wb + 2), s, off);
    }
    for (int i = 0; i < 8; ++i) {
      int lane = 0;
      for (int e = 4 * i; e < 4 * i + 4; ++e) lane += code[e] * q[e];
      lanes[b % 2][i] = std::fma(float(lane), scale * d, lanes[b % 2][i]);
    }
  }
  float l[8];
  for (int i = 0; i < 8; ++i) l[i] = lanes[0][i] + lanes[1][i];
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])) + off;
}

struct Case {
  int64_t nt, k, n_out;
};

TEST(MatmulQ8, EqualsThePlainContractBitForBit) {
  std::mt19937 rng(71);
  for (DType t : kTypes) {
    for (const Case c : {Case{1, 64, 9}, Case{1, 96, 5}, Case{5, 576, 13}, Case{3, 160, 7}, Case{8, 1536, 6}}) {
      // Raw blocks reach every code and scale; activations span magnitudes, with zero blocks.
      const auto w = random_blocks(rng, t, c.n_out * c.k / 32);
      auto x = random_floats(rng, size_t(c.nt * c.k), -3.0f, 3.0f);
      for (int64_t i = 0; i < 32; ++i) x[size_t(i)] = 0.0f;
      for (size_t i = 64; i < x.size(); i += 97) x[i] *= 1000.0f;
      const auto y = run_q8(x, c.nt, c.k, w, t, c.n_out);
      const size_t rb = row_bytes(t, c.k);
      for (int64_t tok = 0; tok < c.nt; ++tok) {
        for (int64_t o = 0; o < c.n_out; ++o) {
          const float want = plain_dot(x.data() + tok * c.k, w.data() + size_t(o) * rb, c.k, t);
          const float got = y[size_t(tok * c.n_out + o)];
          ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
              << dtype_name(t) << " k=" << c.k << " token " << tok << " row " << o << ": " << got << " vs " << want;
        }
      }
    }
  }
}

// Any token of a batch equals itself alone, at every thread count.
TEST(MatmulQ8, BatchAndThreadInvariant) {
  std::mt19937 rng(72);
  const int64_t k = 576, n_out = 37, nt = 11;
  for (DType t : kTypes) {
    const auto w = quantized_rows(rng, t, n_out, k);
    const auto x = random_floats(rng, size_t(nt * k));
    const auto batch = run_q8(x, nt, k, w, t, n_out);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (int64_t tok = 0; tok < nt; ++tok) {
        const std::vector<float> one(x.begin() + tok * k, x.begin() + (tok + 1) * k);
        const auto alone = run_q8(one, 1, k, w, t, n_out);
        ASSERT_EQ(std::memcmp(alone.data(), batch.data() + tok * n_out, size_t(n_out) * 4), 0)
            << dtype_name(t) << " token " << tok << " threads " << threads;
      }
    }
    set_num_threads(0);
  }
}

// Against the f64 product of the same weights: each activation moves by at most half its block's
// step (amax / 254), so a dot moves by at most the sum over blocks of amax / 254 * sum |w|, plus
// float rounding.
TEST(MatmulQ8, WithinTheActivationRoundingOfTheExactProduct) {
  std::mt19937 rng(73);
  const int64_t k = 1536, n_out = 64, nt = 3;
  for (DType t : kTypes) {
    const auto w = quantized_rows(rng, t, n_out, k);
    const auto x = random_floats(rng, size_t(nt * k));
    const auto y = run_q8(x, nt, k, w, t, n_out);
    const RefMatmul ref = ref_matmul(x.data(), nt, k, w.data(), t, n_out);
    double worst = 0.0;
    for (int64_t tok = 0; tok < nt; ++tok) {
      for (int64_t o = 0; o < n_out; ++o) {
        const auto wd = ref_dequant(t, w.data() + size_t(o) * row_bytes(t, k), k);
        double bound = 0.0;
        for (int64_t b = 0; b < k / 32; ++b) {
          double amax = 0.0, wsum = 0.0;
          for (int64_t e = b * 32; e < b * 32 + 32; ++e) {
            amax = std::max(amax, double(std::fabs(x[size_t(tok * k + e)])));
            wsum += std::fabs(wd[size_t(e)]);
          }
          bound += amax / 254.0 * wsum;
        }
        const size_t i = size_t(tok * n_out + o);
        const double err = std::fabs(y[i] - ref.y[i]);
        EXPECT_LE(err, bound + 1e-5 * ref.abs_sum[i]) << dtype_name(t) << " token " << tok << " row " << o;
        worst = std::max(worst, err / bound);
      }
    }
    EXPECT_GT(worst, 0.0) << dtype_name(t) << ": 8-bit activations should not be exact";
    std::printf("%s: largest error %.3f of its bound\n", std::string(dtype_name(t)).c_str(), worst);
  }
}

TEST(MatmulQ8, RefusesOtherFormatsAndPartialBlocks) {
  std::vector<float> x(64), y(1);
  std::vector<uint8_t> w(1024);
  for (DType t : {DType::F32, DType::F16, DType::Q5_0, DType::Q4_K}) {
    EXPECT_FALSE(matmul_q8_supports(t));
    EXPECT_THROW(matmul_q8(x.data(), 1, 64, w.data(), t, 1, y.data()), std::invalid_argument);
  }
  EXPECT_THROW(matmul_q8(x.data(), 1, 48, w.data(), DType::Q8_0, 1, y.data()), std::invalid_argument);
}

}  // namespace
}  // namespace flashserve::test
