#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "kernels/dtype.h"
#include "tests/kernels/reference.h"

namespace flashserve::test {
namespace {

using namespace kernels;

uint32_t bits_of(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float float_of(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// Round-to-nearest-even into a 16-bit format whose positive codes 0..inf_code increase with value.
// The inf code acts as the value just past the largest finite one (2^(emax+1)), so the overflow
// threshold falls out of the same tie rule.
uint16_t ref_round(double x, uint16_t inf_code, double inf_as, const std::function<double(uint16_t)>& value) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  if (a >= inf_as) return uint16_t(sign | inf_code);
  uint16_t lo = 0, hi = inf_code;  // value(lo) <= a < value(hi)
  while (hi - lo > 1) {
    const uint16_t mid = uint16_t((lo + hi) / 2);
    (value(mid) <= a ? lo : hi) = mid;
  }
  const double dlo = a - value(lo), dhi = (hi == inf_code ? inf_as : value(hi)) - a;
  const uint16_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return uint16_t(sign | pick);
}

uint16_t ref_to_half(float f) { return ref_round(f, 0x7c00, 65536.0, ref_half); }
uint16_t ref_to_bf16(float f) { return ref_round(f, 0x7f80, std::ldexp(1.0, 128), ref_bf16); }

TEST(Fp16, DecodeAllCodesExactly) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(uint16_t(h));
    const double want = ref_half(uint16_t(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_EQ(bits_of(f) & 0x7fe000u, (h & 0x3ffu) << 13) << "nan payload kept, code " << std::hex << h;
    } else {
      ASSERT_EQ(double(f), want) << std::hex << h;
      ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << std::hex << h;
    }
  }
}

TEST(Fp16, EncodeRoundTripsAndRoundsTiesToEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t code = uint16_t(h);
    if ((code & 0x7c00) == 0x7c00 && (code & 0x3ff)) continue;  // nan: checked separately
    ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(code)), code) << std::hex << h;
    if ((code & 0x7fff) >= 0x7bff) continue;  // no finite successor
    // Exact midpoint to the next code (representable in f32), and one f32 ulp either side.
    const float a = fp16_to_fp32(code), b = fp16_to_fp32(uint16_t(code + 1));
    const float mid = float((double(a) + double(b)) / 2);
    ASSERT_EQ(double(mid), (double(a) + double(b)) / 2);
    const uint16_t even = (code & 1) ? uint16_t(code + 1) : code;
    ASSERT_EQ(fp32_to_fp16(mid), even) << std::hex << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, a)), code) << std::hex << h;
    ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, b)), uint16_t(code + 1)) << std::hex << h;
  }
}

TEST(Fp16, SpecialValues) {
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-1e9f), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);    // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);    // tie to even (zero)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);    // smallest normal
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
  const uint16_t n = fp32_to_fp16(NAN);
  EXPECT_EQ(n & 0x7c00, 0x7c00);
  EXPECT_NE(n & 0x3ff, 0);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(-NAN))));
}

TEST(Fp16, RandomFloatsRoundToNearest) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    // Random sign and mantissa with exponents spanning subnormal-half to overflow.
    const uint32_t exp = 127 - 30 + bits(rng) % 50;
    const float f = float_of((bits(rng) & 0x807fffffu) | (exp << 23));
    ASSERT_EQ(fp32_to_fp16(f), ref_to_half(f)) << f;
  }
}

TEST(Bf16, RoundTripTiesAndSpecials) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t code = uint16_t(h);
    if ((code & 0x7f80) == 0x7f80 && (code & 0x7f)) {
      EXPECT_TRUE(std::isnan(bf16_to_fp32(code)));
      EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(bf16_to_fp32(code)))));
      continue;
    }
    ASSERT_EQ(double(bf16_to_fp32(code)), ref_bf16(code));
    ASSERT_EQ(fp32_to_bf16(bf16_to_fp32(code)), code) << std::hex << h;
    if ((code & 0x7fff) >= 0x7f7f) continue;
    const float mid = float_of((uint32_t(code) << 16) | 0x8000);  // exact midpoint to code + 1
    ASSERT_EQ(fp32_to_bf16(mid), (code & 1) ? uint16_t(code + 1) : code) << std::hex << h;
  }
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds past the top
  std::mt19937 rng(12);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 100000; ++i) {
    const float f = float_of(bits(rng));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_bf16(f), ref_to_bf16(f)) << f;
  }
}

// Nearest code, ties to the even one; from 448 on (infinity too) the largest finite, as CUDA's
// satfinite conversion.
uint8_t ref_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const double a = std::fabs(double(f));
  if (a >= 448) return uint8_t(sign | 0x7e);
  uint8_t lo = 0, hi = 0x7e;  // ref_e4m3(lo) <= a < ref_e4m3(hi)
  while (hi - lo > 1) {
    const uint8_t mid = uint8_t((lo + hi) / 2);
    (ref_e4m3(mid) <= a ? lo : hi) = mid;
  }
  const double dlo = a - ref_e4m3(lo), dhi = ref_e4m3(hi) - a;
  return uint8_t(sign | (dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi)));
}

TEST(Fp8E4M3, DecodeAllCodesAndRoundTrip) {
  for (int c = 0; c < 256; ++c) {
    const uint8_t code = uint8_t(c);
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(fp8_e4m3_to_fp32(code)));
      continue;
    }
    ASSERT_EQ(double(fp8_e4m3_to_fp32(code)), ref_e4m3(code)) << std::hex << c;
    ASSERT_EQ(std::signbit(fp8_e4m3_to_fp32(code)), bool(code & 0x80)) << std::hex << c;
    ASSERT_EQ(fp32_to_fp8_e4m3(fp8_e4m3_to_fp32(code)), code) << std::hex << c;
  }
}

TEST(Fp8E4M3, TiesSaturationAndSpecials) {
  EXPECT_EQ(fp32_to_fp8_e4m3(448.0f), 0x7e);
  EXPECT_EQ(fp32_to_fp8_e4m3(464.0f), 0x7e);  // the midpoint to the NaN code saturates
  EXPECT_EQ(fp32_to_fp8_e4m3(1e6f), 0x7e);
  EXPECT_EQ(fp32_to_fp8_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(fp32_to_fp8_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(fp32_to_fp8_e4m3(NAN), 0x7f);
  EXPECT_EQ(fp32_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(fp32_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);  // half the smallest subnormal: even
  EXPECT_EQ(fp32_to_fp8_e4m3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 steps: to even 2
  EXPECT_EQ(fp32_to_fp8_e4m3(std::ldexp(1.0f, -6)), 0x08);   // smallest normal
  EXPECT_EQ(fp32_to_fp8_e4m3(1.0625f), 0x38);                // 1 + 1/16: tie to even 1.0
  EXPECT_EQ(fp32_to_fp8_e4m3(1.1875f), 0x3a);                // 1 + 3/16: tie to even 1.25
  for (int c = 0; c < 0x7e; ++c) {  // every midpoint between neighbours, and one f32 ulp either side
    const float a = fp8_e4m3_to_fp32(uint8_t(c)), b = fp8_e4m3_to_fp32(uint8_t(c + 1));
    const float mid = float((double(a) + double(b)) / 2);
    ASSERT_EQ(fp32_to_fp8_e4m3(mid), c % 2 ? c + 1 : c) << c;
    ASSERT_EQ(fp32_to_fp8_e4m3(std::nextafter(mid, a)), c) << c;
    ASSERT_EQ(fp32_to_fp8_e4m3(std::nextafter(mid, b)), c + 1) << c;
  }
  std::mt19937 rng(13);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t exp = 127 - 12 + bits(rng) % 24;  // half the smallest subnormal to past 448
    const float f = float_of((bits(rng) & 0x807fffffu) | (exp << 23));
    ASSERT_EQ(fp32_to_fp8_e4m3(f), ref_to_e4m3(f)) << f;
  }
}

TEST(DType, Metadata) {
  EXPECT_EQ(dtype_from_ggml(0), DType::F32);
  EXPECT_EQ(dtype_from_ggml(3), DType::Q4_1);
  EXPECT_EQ(dtype_from_ggml(8), DType::Q8_0);
  EXPECT_EQ(dtype_from_ggml(30), DType::BF16);
  EXPECT_FALSE(dtype_from_ggml(9).has_value());  // Q8_1: unsupported
  EXPECT_EQ(dtype_name(DType::Q4_0), "Q4_0");
  EXPECT_EQ(row_bytes(DType::F16, 7), 14u);
  EXPECT_EQ(row_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(row_bytes(DType::Q4_1, 576), 360u);
  EXPECT_EQ(row_bytes(DType::Q8_0, 96), 102u);
  EXPECT_EQ(block_elems(DType::BF16), 1);
  EXPECT_EQ(block_elems(DType::Q8_0), 32);
  EXPECT_EQ(row_bytes(DType::F8_E4M3, 64), 64u);
  EXPECT_EQ(dtype_name(DType::F8_E4M3), "F8_E4M3");
  EXPECT_FALSE(dtype_from_ggml(uint32_t(DType::F8_E4M3)).has_value());  // a KV cache type only
}

// Hand-built blocks: scale codes chosen exactly (0x3800 = 0.5, 0x3400 = 0.25, 0xbe00 = -1.5,
// 0x3000 = 0.125) and nibbles that differ between element j and j + 16.
TEST(Dequantize, HandBuiltBlocks) {
  BlockQ4_0 q40[2];
  BlockQ4_1 q41{0x3400, 0xbe00, {}};
  BlockQ8_0 q80{0x3000, {}};
  q40[0].d = 0x3800;
  q40[1].d = 0xb400;  // -0.25
  for (int j = 0; j < 16; ++j) {
    q40[0].qs[j] = uint8_t(j | ((15 - j) << 4));
    q40[1].qs[j] = uint8_t(((j * 7) & 15) | (((j * 3) & 15) << 4));
    q41.qs[j] = uint8_t(((j + 5) & 15) | (j << 4));
  }
  for (int j = 0; j < 32; ++j) q80.qs[j] = int8_t(j * 8 - 128);

  std::vector<float> out(64);
  dequantize_row(DType::Q4_0, q40, out.data(), 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.5f * float(j - 8));
    EXPECT_EQ(out[j + 16], 0.5f * float(15 - j - 8));
    EXPECT_EQ(out[32 + j], -0.25f * float(((j * 7) & 15) - 8));
    EXPECT_EQ(out[48 + j], -0.25f * float(((j * 3) & 15) - 8));
  }
  dequantize_row(DType::Q4_1, &q41, out.data(), 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 0.25f * float((j + 5) & 15) - 1.5f);
    EXPECT_EQ(out[j + 16], 0.25f * float(j) - 1.5f);
  }
  dequantize_row(DType::Q8_0, &q80, out.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.125f * float(j * 8 - 128));
  EXPECT_EQ(fp32_to_fp16(0.5f), 0x3800);
  EXPECT_EQ(fp32_to_fp16(-1.5f), 0xbe00);
}

// Rounding error of storing v as f16: relative 2^-11 when normal, absolute 2^-25 when subnormal.
double half_err(double v) { return std::max(std::fabs(v) * std::ldexp(1.0, -11), std::ldexp(1.0, -25)); }

// Max error of quantize -> dequantize per block: half a step (a whole one for the clamped extreme
// of Q4_0), plus the step times the largest |q| and the offset losing bits to their f16 storage.
double error_bound(DType t, const float* x) {
  float mn = x[0], mx = x[0], amax = 0;
  for (int j = 0; j < 32; ++j) { mn = std::min(mn, x[j]); mx = std::max(mx, x[j]); amax = std::max(amax, std::fabs(x[j])); }
  const double slack = 1e-6 * amax;
  switch (t) {
    case DType::Q8_0: { const double d = amax / 127.0; return d * 0.5 + 127 * half_err(d) + slack; }
    case DType::Q4_0: { const double d = amax / 8.0; return d + 8 * half_err(d) + slack; }
    case DType::Q4_1: { const double d = (mx - mn) / 15.0; return d * 0.5 + 15 * half_err(d) + half_err(mn) + slack; }
    default: return 0;
  }
}

TEST(Quantize, RoundTripErrorWithinBound) {
  std::mt19937 rng(13);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1}) {
    for (float scale : {1e-3f, 1.0f, 300.0f}) {
      const int64_t n = 32 * 40;
      auto x = random_floats(rng, n, -scale, scale);
      for (int64_t i = 0; i < n; i += 97) x[i] *= 3;  // outliers widen some blocks' range
      std::vector<uint8_t> q(row_bytes(t, n));
      quantize_row(t, x.data(), q.data(), n);
      const auto back = ref_dequant(t, q.data(), n);
      for (int64_t b = 0; b < n / 32; ++b) {
        const double bound = error_bound(t, x.data() + 32 * b);
        for (int j = 0; j < 32; ++j)
          ASSERT_LE(std::fabs(back[32 * b + j] - x[32 * b + j]), bound) << dtype_name(t) << " block " << b;
      }
    }
  }
}

TEST(Quantize, GgmlScaleConventions) {
  // Q4_0's scale comes from the signed extreme: -4 maps to q = 0 (-8 steps of d = 0.5) exactly.
  float x[32] = {};
  x[0] = -4.0f; x[1] = 3.5f; x[2] = 1.0f;
  BlockQ4_0 b40;
  quantize_row(DType::Q4_0, x, &b40, 32);
  EXPECT_EQ(b40.d, fp32_to_fp16(0.5f));
  EXPECT_EQ(b40.qs[0] & 0xf, 0);
  EXPECT_EQ(b40.qs[1] & 0xf, 15);  // 3.5 / 0.5 + 8 = 15
  EXPECT_EQ(b40.qs[2] & 0xf, 10);
  // Q4_1: m is the minimum, d = range / 15.
  for (int j = 0; j < 32; ++j) x[j] = -1.0f + float(j % 16) * 0.25f;
  BlockQ4_1 b41;
  quantize_row(DType::Q4_1, x, &b41, 32);
  EXPECT_EQ(b41.m, fp32_to_fp16(-1.0f));
  EXPECT_EQ(b41.d, fp32_to_fp16(0.25f));
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b41.qs[j], uint8_t(j | (j << 4)));
  // Q8_0: amax maps to +-127; all-zero blocks stay zero.
  for (int j = 0; j < 32; ++j) x[j] = j == 5 ? -2.54f : 0.01f * float(j);
  BlockQ8_0 b80;
  quantize_row(DType::Q8_0, x, &b80, 32);
  EXPECT_EQ(b80.qs[5], -127);
  EXPECT_EQ(b80.qs[10], 5);  // 0.1 / 0.02
  std::fill(x, x + 32, 0.0f);
  quantize_row(DType::Q8_0, x, &b80, 32);
  EXPECT_EQ(b80.d, 0);
  for (int8_t q : b80.qs) EXPECT_EQ(q, 0);
}

TEST(Quantize, HalfRowsMatchScalarConversion) {
  std::mt19937 rng(14);
  const auto x = random_floats(rng, 77, -70000.0f, 70000.0f);
  std::vector<uint16_t> h(77), b(77);
  quantize_row(DType::F16, x.data(), h.data(), 77);
  quantize_row(DType::BF16, x.data(), b.data(), 77);
  std::vector<float> back(77);
  dequantize_row(DType::F16, h.data(), back.data(), 77);
  for (int i = 0; i < 77; ++i) {
    EXPECT_EQ(h[i], ref_to_half(x[i]));
    EXPECT_EQ(b[i], ref_to_bf16(x[i]));
    EXPECT_EQ(double(back[i]), ref_half(h[i]));
  }
  EXPECT_THROW(dequantize_row(DType::Q4_1, h.data(), back.data(), 33), std::invalid_argument);
}

}  // namespace
}  // namespace flashserve::test
