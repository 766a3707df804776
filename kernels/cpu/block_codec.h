// Scalar element conversions and per-block decoders, inline so that dequantize_row and the
// portable matmul path share one definition of every dequantized value.
#pragma once
#include "kernels/cpu/fused_mul_add.h"
#include "kernels/cpu/isa_namespace.h"
#include <cmath>
#include <cstdint>
#include <cstring>
#include "kernels/dtype.h"

namespace flashserve::kernels::FLASHSERVE_ISA::codec {

inline uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
inline float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf, nan keeps payload
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  // Subnormal (or zero): mant * 2^-24 is exact in f32.
  const float mag = float(mant) * 0x1p-24f;
  return sign ? -mag : mag;
}

// Round to nearest even via the FPU: values below 2^-14 are added to 0.5f so the hardware's
// rounding lands the 10 subnormal mantissa bits; normal values get an explicit RNE increment.
inline uint16_t float_to_half(float f) {
  const uint32_t bits = float_bits(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  uint32_t a = bits & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00 | ((a >> 13) & 0x3ff));  // quiet nan
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // >= 65520 rounds to inf
  if (a < 0x38800000u) {                                  // below the smallest normal half
    const float magic = 0.5f;
    const uint32_t r = float_bits(bits_float(a) + magic) - float_bits(magic);
    return uint16_t(sign | r);
  }
  const uint32_t odd = (a >> 13) & 1;
  a += 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and add the RNE rounding increment
  return uint16_t(sign | (a >> 13));
}

inline float bf16_to_float(uint16_t h) { return bits_float(uint32_t(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t bits = float_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // keep nan quiet
  return uint16_t((bits + 0x7fffu + ((bits >> 16) & 1)) >> 16);
}

// fp8 E4M3 (kernels/dtype.h): exact in f32.
inline float e4m3_to_float(uint8_t x) {
  const uint32_t sign = uint32_t(x & 0x80) << 24;
  const uint32_t exp = (x >> 3) & 0x0f, mant = x & 7;
  if ((x & 0x7f) == 0x7f) return bits_float(sign | 0x7fc00000u);
  if (exp != 0) return bits_float(sign | ((exp + 120) << 23) | (mant << 20));
  const float mag = float(mant) * 0x1p-9f;  // subnormal: mant * 2^-9
  return sign ? -mag : mag;
}

// Round to nearest even, saturating at +-448 as CUDA's satfinite conversion does: below 2^-6 the
// FPU rounds x + 2^14 to its ulp of 2^-9, E4M3's subnormal step; above, an explicit RNE increment
// on the 20 bits dropped from f32's mantissa.
inline uint8_t float_to_e4m3(float f) {
  const uint32_t bits = float_bits(f);
  const uint8_t sign = uint8_t((bits >> 24) & 0x80);
  const uint32_t a = bits & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;                   // NaN
  if (a >= 0x43e00000u) return uint8_t(sign | 0x7e);  // 448 and beyond, infinity too
  if (a < 0x3c800000u) {                              // below 2^-6, the smallest normal
    const float magic = 16384.0f;
    return uint8_t(sign | (float_bits(bits_float(a) + magic) - float_bits(magic)));
  }
  const uint32_t odd = (a >> 20) & 1;
  return uint8_t(sign | ((a - (120u << 23) + 0x7ffffu + odd) >> 20));
}

inline void decode_block(const BlockQ4_0& b, float* out) {
  const float d = half_to_float(b.d);
  for (int j = 0; j < 16; ++j) {
    out[j] = float((b.qs[j] & 0x0f) - 8) * d;
    out[j + 16] = float((b.qs[j] >> 4) - 8) * d;
  }
}

inline void decode_block(const BlockQ4_1& b, float* out) {
  const float d = half_to_float(b.d);
  const float m = half_to_float(b.m);
  for (int j = 0; j < 16; ++j) {
    out[j] = fused_mul_add(float(b.qs[j] & 0x0f), d, m);
    out[j + 16] = fused_mul_add(float(b.qs[j] >> 4), d, m);
  }
}

inline void decode_block(const BlockQ8_0& b, float* out) {
  const float d = half_to_float(b.d);
  for (int j = 0; j < 32; ++j) out[j] = float(b.qs[j]) * d;
}

inline uint32_t load_u32(const uint8_t* p) { uint32_t u; std::memcpy(&u, p, 4); return u; }

// Element j's 5-bit q in a Q5_0/Q5_1 block.
inline int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int nibble = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
  return nibble | int((qh >> j) & 1) << 4;
}

inline void decode_block(const BlockQ5_0& b, float* out) {
  const float d = half_to_float(b.d);
  const uint32_t qh = load_u32(b.qh);
  for (int j = 0; j < 32; ++j) out[j] = float(q5_value(b.qs, qh, j) - 16) * d;
}

// d * q is exact in f32 (11 by 5 significant bits), so this equals the unfused d * q + m too.
inline void decode_block(const BlockQ5_1& b, float* out) {
  const float d = half_to_float(b.d);
  const float m = half_to_float(b.m);
  const uint32_t qh = load_u32(b.qh);
  for (int j = 0; j < 32; ++j) out[j] = fused_mul_add(float(q5_value(b.qs, qh, j)), d, m);
}

// 16 bytes of IQ4 nibbles (element j low, j + 16 high) times a scale.
inline void decode_iq4(const uint8_t* qs, float d, float* out) {
  for (int j = 0; j < 16; ++j) {
    out[j] = float(kIQ4Values[qs[j] & 0x0f]) * d;
    out[j + 16] = float(kIQ4Values[qs[j] >> 4]) * d;
  }
}

inline void decode_block(const BlockIQ4_NL& b, float* out) { decode_iq4(b.qs, half_to_float(b.d), out); }

// llama.cpp's q8_0: 32 values as round(x / d) with d = max |x| / 127, d kept as f16. Inline here
// rather than in quantize_blocks.cpp: a q8_0 KV cache quantizes in every copy of the kernels, each
// with the same arithmetic (no contraction), so each stores the same bits.
inline void quantize_block(const float* x, BlockQ8_0& y) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float a = std::fabs(x[j]);
    if (amax < a) amax = a;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = float_to_half(d);
  for (int j = 0; j < 32; ++j) y.qs[j] = int8_t(std::round(x[j] * id));
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA::codec
