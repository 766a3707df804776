// The arithmetic the CPU ops share so that every compiled copy and every machine gives the same
// bits: fused_mul_add where the build has no FMA (the scalar copy), and the libm-free exp, log,
// sin and cos behind RoPE's angles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/cpu/fused_mul_add.h"
#include "kernels/cpu/portable_math.h"

namespace flashserve::kernels {
namespace {

using isa_scalar::fused_mul_add;
namespace portable = isa_scalar::portable;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float with_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// libm's fmaf rounds once (in hardware, or in software on a CPU without FMA): the emulation must
// give its bits, on random operands of every scale and on sums that cancel or sit on a halfway point
// between two floats, where rounding twice goes wrong.
TEST(FusedMulAdd, EqualsOneRoundingOfTheExactValue) {
#if defined(__FMA__)
  GTEST_SKIP() << "this build has the FMA instruction; the emulation is for builds without it";
#endif
  std::mt19937 rng(1);
  std::uniform_int_distribution<uint32_t> any;
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  int checked = 0;
  auto check = [&](float a, float b, float c) {
    const float want = std::fma(a, b, c), got = fused_mul_add(a, b, c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << a << " * " << b << " + " << c;
    } else {
      ASSERT_EQ(bits(got), bits(want)) << a << " * " << b << " + " << c;
    }
    ++checked;
  };
  for (int i = 0; i < 300000; ++i) {
    check(with_bits(any(rng)), with_bits(any(rng)), with_bits(any(rng)));  // every exponent, inf, nan
    const float a = unit(rng), b = unit(rng);
    check(a, b, -a * b);                                   // near-total cancellation
    check(a, b, std::ldexp(unit(rng), -24 - int(i % 30)));  // c far below the product's last bit
    // Product just beside a halfway point: a = 1 + 2^-k, b = 1 + 2^-m, c pushing it there.
    const float x = 1.0f + std::ldexp(1.0f, -1 - int(i % 23)), y = 1.0f + std::ldexp(1.0f, -1 - int((i / 23) % 23));
    check(x, y, std::ldexp(float(i % 7) - 3.0f, -24));
  }
  for (float s : {0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::denorm_min(), 1e-38f, 3e38f})
    for (float t : {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, std::numeric_limits<float>::denorm_min(), 3e38f})
      check(s, t, s), check(s, t, -t), check(t, s, 1.0f);
  EXPECT_GT(checked, 900000);
}

// Within a few ulps of double of the x87's extended-precision libm (64-bit mantissa).
TEST(PortableMath, ExpLogSinCosAreAccurate) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> exp_in(-40.0, 40.0), log_in(-30.0, 30.0), angle(0.0, 2.0e5);
  double worst_exp = 0, worst_log = 0, worst_trig = 0;
  for (int i = 0; i < 200000; ++i) {
    const double x = exp_in(rng);
    worst_exp = std::max(worst_exp, double(std::fabs((portable::exp(x) - expl(x)) / expl(x))));
    const double y = std::exp2(log_in(rng));
    worst_log = std::max(worst_log, double(std::fabs(portable::log(y) - logl(y))));
    const double a = i < 1000 ? double(i) * 0.7853981633974483 : angle(rng);  // multiples of pi/4 too
    double s = 0, c = 0;
    portable::sincos(a, s, c);
    worst_trig = std::max({worst_trig, double(std::fabs(s - sinl(a))), double(std::fabs(c - cosl(a)))});
  }
  std::printf("[ portable ] worst: exp %.2e relative, log %.2e absolute, sin/cos %.2e absolute\n", worst_exp, worst_log,
              worst_trig);
  EXPECT_LT(worst_exp, 1e-15);
  EXPECT_LT(worst_log, 1e-14);
  EXPECT_LT(worst_trig, 1e-13);  // angles to 2e5 rad: the reduction's error grows with the angle
}

}  // namespace
}  // namespace flashserve::kernels
