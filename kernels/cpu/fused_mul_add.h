// a * b + c rounded once, in every compiled copy: the FMA instruction where the build has it, else
// exact double arithmetic. A plain `a * b + c` rounds twice without FMA and once with it (GCC
// contracts it), which is how the scalar copy of the ops once parted from the vector ones.
#pragma once
#include "kernels/cpu/isa_namespace.h"
#include <cmath>
#include <cstdint>
#include <cstring>

namespace flashserve::kernels::FLASHSERVE_ISA {

inline float fused_mul_add(float a, float b, float c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  // The product of two floats is exact in double. Their sum with c rounds once more, so s is
  // rounded to odd first (the sticky bit of Boldo and Melquiond): rounding that to float then
  // equals one rounding of the exact value, as 53 bits exceed 24 + 2.
  const double p = double(a) * double(b);
  const double s = p + double(c);
  if (!std::isfinite(s)) return float(s);
  const double bv = s - p;
  const double err = (p - (s - bv)) + (double(c) - bv);  // s + err is exact (TwoSum)
  uint64_t bits;
  std::memcpy(&bits, &s, 8);
  if (err == 0.0 || (bits & 1) != 0) return float(s);
  bits += (err > 0.0) == (s > 0.0) ? 1 : uint64_t(-1);
  double odd;
  std::memcpy(&odd, &bits, 8);
  return float(odd);
#endif
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
