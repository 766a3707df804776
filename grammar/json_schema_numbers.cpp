// minimum/maximum/exclusiveMinimum/exclusiveMaximum as rules over decimal digits: the canonical
// texts (no leading zeros, no "-0") of exactly the integers in a range, built digit by digit.
#include <algorithm>
#include <cmath>

#include "grammar/json_schema_detail.h"

namespace flashserve::grammar::json_schema_detail {
namespace {

// Integers of at most 18 digits, as the `integer` rule writes them (any bound beyond is no bound).
constexpr int64_t kCap = 999'999'999'999'999'999;
constexpr int64_t kBeyond = kCap + 1;

uint64_t pow10(int n) {
  uint64_t v = 1;
  while (n-- > 0) v *= 10;
  return v;
}

int num_digits(uint64_t v) {
  int n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

std::string any_digits(int n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
}

std::string digit_span(char a, char b) {
  return a == b ? std::string("\"") + a + "\"" : std::string("[") + a + "-" + b + "]";
}

std::string join_alternatives(const std::vector<std::string>& alts) {
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

std::string grouped(const std::vector<std::string>& alts) {
  return alts.size() == 1 ? alts[0] : "( " + join_alternatives(alts) + " )";
}

// Digit strings of one width from lo to hi (same length, lo <= hi), as alternatives: the common
// prefix, then the first differing digit splits the range into its low edge, a middle where every
// later digit is free, and its high edge.
std::vector<std::string> same_width(const std::string& lo, const std::string& hi) {
  if (lo == hi) return {"\"" + lo + "\""};
  size_t common = 0;
  while (lo[common] == hi[common]) ++common;
  const int rest = int(lo.size() - common - 1);
  const std::string lo_rest = lo.substr(common + 1), hi_rest = hi.substr(common + 1);
  const bool low_edge_full = lo_rest.find_first_not_of('0') == std::string::npos;
  const bool high_edge_full = hi_rest.find_first_not_of('9') == std::string::npos;
  char first = lo[common], last = hi[common];
  std::vector<std::string> alts;
  if (!low_edge_full) {
    alts.push_back(std::string("\"") + first + "\" " + grouped(same_width(lo_rest, std::string(size_t(rest), '9'))));
    ++first;
  }
  const char middle_last = high_edge_full ? last : char(last - 1);
  if (first <= middle_last) alts.push_back(digit_span(first, middle_last) + (rest > 0 ? " " + any_digits(rest) : ""));
  if (!high_edge_full) {
    alts.push_back(std::string("\"") + last + "\" " + grouped(same_width(std::string(size_t(rest), '0'), hi_rest)));
  }
  if (common == 0) return alts;
  return {"\"" + lo.substr(0, common) + "\" " + grouped(alts)};
}

// The integers lo..hi (0 <= lo <= hi <= kCap) written without sign or leading zeros.
std::vector<std::string> unsigned_range(uint64_t lo, uint64_t hi) {
  std::vector<std::string> out;
  const int lo_width = num_digits(lo), hi_width = num_digits(hi);
  for (int w = lo_width; w <= hi_width; ++w) {
    const uint64_t from = w == lo_width ? lo : pow10(w - 1);
    const uint64_t to = w == hi_width ? hi : pow10(w) - 1;
    const bool whole_width = w >= 2 && from == pow10(w - 1) && to == pow10(w) - 1;
    if (!whole_width) {
      for (std::string& a : same_width(std::to_string(from), std::to_string(to))) out.push_back(std::move(a));
      continue;
    }
    // Consecutive whole widths share one rule: [1-9] [0-9]{w-1,last-1}.
    int last = w;
    while (last + 1 < hi_width || (last + 1 == hi_width && hi == pow10(hi_width) - 1)) ++last;
    out.push_back(last == w ? "[1-9] " + any_digits(w - 1)
                            : "[1-9] [0-9]{" + std::to_string(w - 1) + "," + std::to_string(last - 1) + "}");
    w = last;
  }
  return out;
}

// The integers lo..hi (|lo|, |hi| <= kCap), negatives first.
std::vector<std::string> signed_range(int64_t lo, int64_t hi) {
  std::vector<std::string> out;
  if (lo > hi) return out;
  if (lo < 0) out.push_back("\"-\" " + grouped(unsigned_range(uint64_t(std::max<int64_t>(-hi, 1)), uint64_t(-lo))));
  if (hi >= 0) {
    for (std::string& a : unsigned_range(uint64_t(std::max<int64_t>(lo, 0)), uint64_t(hi))) out.push_back(std::move(a));
  }
  return out;
}

int64_t clamp(int64_t v) { return std::clamp(v, -kBeyond, kBeyond); }

// floor or ceiling of a JSON number, clamped to +-kBeyond (past every integer the grammar writes).
int64_t rounded(const Json& v, bool up) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() > uint64_t(kBeyond) ? kBeyond : int64_t(v.get<uint64_t>());
  if (v.is_number_integer()) return clamp(v.get<int64_t>());
  const double d = up ? std::ceil(v.get<double>()) : std::floor(v.get<double>());
  if (d >= double(kBeyond)) return kBeyond;
  if (d <= -double(kBeyond)) return -kBeyond;
  return int64_t(d);
}

struct Bounds {
  int64_t int_lo, int_hi;         // the integers in range
  int64_t frac_lo, frac_hi;       // I >= 0 with [I, I+1) in range: "I.ddd"
  int64_t neg_frac_lo, neg_frac_hi;  // I >= 0 with (-(I+1), -I] in range: "-I.ddd"
};

Bounds bounds_of(const Json& s) {
  auto get = [&](const char* k, bool up, int64_t absent) { return s.contains(k) ? rounded(s[k], up) : absent; };
  const int64_t ceil_min = get("minimum", true, -kBeyond), ceil_xmin = get("exclusiveMinimum", true, -kBeyond);
  const int64_t floor_xmin = get("exclusiveMinimum", false, -kBeyond - 1);
  const int64_t floor_max = get("maximum", false, kBeyond), floor_xmax = get("exclusiveMaximum", false, kBeyond);
  const int64_t ceil_xmax = get("exclusiveMaximum", true, kBeyond + 1);
  Bounds b{};
  b.int_lo = std::max({ceil_min, floor_xmin + 1, -kCap});
  b.int_hi = std::min({floor_max, ceil_xmax - 1, kCap});
  // Value in [I, I+1): at least I >= int_lo >= the lower bound; below I+1 <= the upper bound.
  b.frac_lo = std::max<int64_t>(b.int_lo, 0);
  b.frac_hi = std::min({floor_max, floor_xmax}) - 1;
  // Value in (-(I+1), -I]: above -(I+1) >= the lower bound; at most -I <= int_hi.
  b.neg_frac_lo = std::max<int64_t>(-b.int_hi, 0);
  b.neg_frac_hi = -std::max({ceil_min, ceil_xmin}) - 1;
  b.frac_hi = std::min(b.frac_hi, kCap);
  b.neg_frac_hi = std::min(b.neg_frac_hi, kCap);
  return b;
}

}  // namespace

bool has_numeric_bounds(const Json& s) {
  return s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
         s.contains("exclusiveMaximum");
}

std::vector<std::string> bounded_number_alternatives(const Json& s, bool integer_only, const std::string& fraction_rule) {
  const Bounds b = bounds_of(s);
  std::vector<std::string> out = signed_range(b.int_lo, b.int_hi);
  if (integer_only) return out;
  if (b.frac_lo <= b.frac_hi) out.push_back(grouped(signed_range(b.frac_lo, b.frac_hi)) + " " + fraction_rule);
  if (b.neg_frac_lo <= b.neg_frac_hi) {
    out.push_back("\"-\" " + grouped(signed_range(b.neg_frac_lo, b.neg_frac_hi)) + " " + fraction_rule);
  }
  return out;
}

}  // namespace flashserve::grammar::json_schema_detail
