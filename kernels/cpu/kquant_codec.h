// Scalar decoders of the 256-element super-block types, one 32-element chunk at a time (the unit
// the matmul tiles work in), and the per-chunk scale helpers the SIMD decoders share, so both compute
// every scale with the same expression. The helpers take d and dmin already converted, so the SIMD
// side can use the hardware f16 conversion (equal to ours on every finite value).
// Each value is a single rounding: a scale times its code (f16 by at most 8 bits) is exact in f32,
// and so is that times q everywhere but Q6_K and Q8_K (one rounding there); so fused and unfused
// evaluation agree, and the values match gguf's numpy dequantizer bit for bit.
#pragma once
#include "kernels/cpu/block_codec.h"

namespace flashserve::kernels::FLASHSERVE_ISA::codec {

inline constexpr int kChunk = 32;
inline constexpr int kChunks = int(kSuperBlock) / kChunk;

// x = q * d - m.
struct Affine { float d, m; };

// Q2_K sub-block i of 16.
inline Affine q2k_affine(const BlockQ2_K& b, int i, float d, float dmin) {
  return {d * float(b.scales[i] & 0x0f), dmin * float(b.scales[i] >> 4)};
}

// Q3_K sub-block i of 16.
inline float q3k_scale(const BlockQ3_K& b, int i, float d) { return d * float(q3k_scale_code(b.scales, i)); }

// Q4_K / Q5_K chunk j.
template <class Block>
inline Affine k_affine(const Block& b, int j, float d, float dmin) {
  const ScaleMin s = k_scale_min(b.scales, j);
  return {d * float(s.sc), dmin * float(s.m)};
}

// Q6_K sub-block i of 16.
inline float q6k_scale(const BlockQ6_K& b, int i, float d) { return d * float(b.scales[i]); }

// IQ4_XS chunk c.
inline float iq4xs_scale(const BlockIQ4_XS& b, int c, float d) {
  return d * float(iq4xs_scale_code(b.scales_l[c / 2], b.scales_h, c));
}

inline void decode_chunk(const BlockQ2_K& b, int c, float* out) {
  const uint8_t* qs = b.qs + 32 * (c / 4);
  const int shift = 2 * (c % 4);
  for (int half = 0; half < 2; ++half) {
    const Affine a = q2k_affine(b, 2 * c + half, half_to_float(b.d), half_to_float(b.dmin));
    for (int l = 16 * half; l < 16 * half + 16; ++l)
      out[l] = fused_mul_add(float((qs[l] >> shift) & 3), a.d, -a.m);
  }
}

inline void decode_chunk(const BlockQ3_K& b, int c, float* out) {
  const uint8_t* qs = b.qs + 32 * (c / 4);
  const int shift = 2 * (c % 4);
  for (int half = 0; half < 2; ++half) {
    const float d = q3k_scale(b, 2 * c + half, half_to_float(b.d));
    for (int l = 16 * half; l < 16 * half + 16; ++l) {
      const int q = ((qs[l] >> shift) & 3) - ((b.hmask[l] >> c) & 1 ? 0 : 4);
      out[l] = float(q) * d;
    }
  }
}

inline void decode_chunk(const BlockQ4_K& b, int c, float* out) {
  const Affine a = k_affine(b, c, half_to_float(b.d), half_to_float(b.dmin));
  const uint8_t* qs = b.qs + 32 * (c / 2);
  const int shift = 4 * (c % 2);
  for (int l = 0; l < 32; ++l) out[l] = fused_mul_add(float((qs[l] >> shift) & 0x0f), a.d, -a.m);
}

inline void decode_chunk(const BlockQ5_K& b, int c, float* out) {
  const Affine a = k_affine(b, c, half_to_float(b.d), half_to_float(b.dmin));
  const uint8_t* qs = b.qs + 32 * (c / 2);
  const int shift = 4 * (c % 2);
  for (int l = 0; l < 32; ++l) {
    const int q = ((qs[l] >> shift) & 0x0f) | ((b.qh[l] >> c) & 1) << 4;
    out[l] = fused_mul_add(float(q), a.d, -a.m);
  }
}

// (d * s) * (q - 32) may round (25 bits), once, in the same order everywhere.
inline void decode_chunk(const BlockQ6_K& b, int c, float* out) {
  const int h = c / 4, g = c % 4;
  const uint8_t* ql = b.ql + 64 * h + 32 * (g % 2);
  const uint8_t* qh = b.qh + 32 * h;
  for (int half = 0; half < 2; ++half) {
    const float d = q6k_scale(b, 2 * c + half, half_to_float(b.d));
    for (int l = 16 * half; l < 16 * half + 16; ++l) {
      const int q = ((ql[l] >> (4 * (g / 2))) & 0x0f) | ((qh[l] >> (2 * g)) & 3) << 4;
      out[l] = float(q - 32) * d;
    }
  }
}

inline void decode_chunk(const BlockQ8_K& b, int c, float* out) {
  for (int l = 0; l < 32; ++l) out[l] = float(b.qs[32 * c + l]) * b.d;
}

inline void decode_chunk(const BlockIQ4_XS& b, int c, float* out) {
  decode_iq4(b.qs + 16 * c, iq4xs_scale(b, c, half_to_float(b.d)), out);
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA::codec
