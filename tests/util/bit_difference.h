// Bit-for-bit comparison of float results, for the tests that hold the CPU's compiled copies to the
// same bits: == would call +0 and -0 equal and NaN unequal to itself.
#pragma once
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace flashserve::test {

// "" when got and want hold the same bits, else where and how they first differ.
inline std::string first_bit_difference(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return "sizes " + std::to_string(got.size()) + " and " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], 4) != 0) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "element %zu: %.9g against the scalar copy's %.9g", i, got[i], want[i]);
      return buf;
    }
  }
  return "";
}

}  // namespace flashserve::test
