// exp, log, sin and cos in double from + - * / alone, so they give the same bits on every machine:
// libm's versions are free to differ in the last bit between releases and between the code paths
// glibc picks by CPU (with or without FMA), and RoPE's angles go through them. Accurate to a few
// ulps of double, far below the float that the callers round to. Plain C++ compiled with
// -ffp-contract=off (kernels/CMakeLists.txt), so no build fuses a product into a sum.
#pragma once
#include "kernels/cpu/isa_namespace.h"
#include <cmath>

namespace flashserve::kernels::FLASHSERVE_ISA::portable {

inline constexpr double kLn2Hi = 6.93147180369123816490e-01;  // ln 2 to 32 bits: k * kLn2Hi is exact
inline constexpr double kLn2Lo = 1.90821492927058770002e-10;

// e^x for |x| < 700.
inline double exp(double x) {
  const double k = std::nearbyint(x * 1.44269504088896338700e+00);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;  // |r| <= 0.35
  double p = 1.0 / 6227020800.0;                  // Taylor to r^13 / 13!
  for (double f : {479001600.0, 39916800.0, 3628800.0, 362880.0, 40320.0, 5040.0, 720.0, 120.0, 24.0, 6.0, 2.0, 1.0, 1.0})
    p = p * r + 1.0 / f;
  return std::ldexp(p, int(k));  // exact scaling by 2^k
}

// ln x for finite x > 0.
inline double log(double x) {
  int e = 0;
  double m = std::frexp(x, &e);  // x = m 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752440) m *= 2.0, --e;
  const double s = (m - 1.0) / (m + 1.0), s2 = s * s;  // ln m = 2 atanh s, |s| <= 0.172
  double p = 1.0 / 27.0;
  for (int d = 25; d >= 1; d -= 2) p = p * s2 + 1.0 / double(d);
  return double(e) * kLn2Hi + (double(e) * kLn2Lo + 2.0 * s * p);
}

// sin and cos of x for |x| < 2^20 pi/2; past that (positions past a million) they stay the same
// bits everywhere, only less accurate.
inline void sincos(double x, double& sin_x, double& cos_x) {
  // pi/2 in three parts of 33 bits and a tail (fdlibm's): n times each of the first two is exact.
  const double n = std::nearbyint(x * 6.36619772367581382433e-01);
  const double r = (((x - n * 1.57079632673412561417e+00) - n * 6.07710050630396597660e-11) -
                    n * 2.02226624871116645580e-21) - n * 8.47842766036889956997e-32;  // |r| <= pi/4
  const double r2 = r * r;
  // Taylor: sin to r^17 / 17!, cos to r^18 / 18!.
  constexpr double kSin[] = {1.0 / 355687428096000.0, -1.0 / 1307674368000.0, 1.0 / 6227020800.0, -1.0 / 39916800.0,
                             1.0 / 362880.0,          -1.0 / 5040.0,          1.0 / 120.0,        -1.0 / 6.0};
  constexpr double kCos[] = {-1.0 / 6402373705728000.0, 1.0 / 20922789888000.0, -1.0 / 87178291200.0,
                             1.0 / 479001600.0,         -1.0 / 3628800.0,       1.0 / 40320.0,
                             -1.0 / 720.0,              1.0 / 24.0,             -1.0 / 2.0};
  double ps = 0.0, pc = 0.0;
  for (const double k : kSin) ps = ps * r2 + k;
  for (const double k : kCos) pc = pc * r2 + k;
  const double s = r + r * r2 * ps, c = 1.0 + r2 * pc;
  switch (static_cast<long long>(n) & 3) {
    case 0: sin_x = s, cos_x = c; break;
    case 1: sin_x = c, cos_x = -s; break;
    case 2: sin_x = -s, cos_x = -c; break;
    default: sin_x = -c, cos_x = s; break;
  }
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA::portable
