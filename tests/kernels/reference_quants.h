// Double-precision element decoders of the Q5_x, IQ4 and 256-element super-block formats, written
// from GGML's byte layouts (offsets into the raw bytes, no structs or code from kernels/cpu).
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"

namespace flashserve::test {

inline double ref_half(uint16_t h);  // defined in reference.h, which includes this file

namespace ref_quants {

inline uint16_t u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline uint32_t u32(const uint8_t* p) { return uint32_t(u16(p)) | uint32_t(u16(p + 2)) << 16; }
inline double half_at(const uint8_t* p) { return ref_half(u16(p)); }

// The IQ4_NL / IQ4_XS codebook as GGML defines it.
constexpr int kCodebook[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Element j of 16 packed bytes: low nibbles are elements 0..15, high nibbles 16..31.
inline int nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }

// Q4_K / Q5_K: 6-bit scale (which = 0) or min (which = 1) of sub-block j from the 12 packed bytes.
inline int k_code(const uint8_t* s, int j, int which) {
  if (j < 4) return s[j + 4 * which] & 63;
  const int low = which == 0 ? s[j + 4] & 15 : s[j + 4] >> 4;
  return low | (s[j - 4 * (1 - which)] >> 6) << 4;
}

// Element i of a row of type t.
inline double elem(kernels::DType t, const uint8_t* row, int64_t i) {
  using kernels::DType;
  const int j = int(i % 32);               // within a 32-element block
  const int e = int(i % 256), c = e / 32;  // within a super-block, its 32-element chunk
  const int l = e % 32, sub = e / 16;
  switch (t) {
    case DType::Q5_0: {
      const uint8_t* b = row + 22 * (i / 32);
      const int q = nibble(b + 6, j) | int((u32(b + 2) >> j) & 1) << 4;
      return half_at(b) * (q - 16);
    }
    case DType::Q5_1: {
      const uint8_t* b = row + 24 * (i / 32);
      const int q = nibble(b + 8, j) | int((u32(b + 4) >> j) & 1) << 4;
      return half_at(b) * q + half_at(b + 2);
    }
    case DType::IQ4_NL: {
      const uint8_t* b = row + 18 * (i / 32);
      return half_at(b) * kCodebook[nibble(b + 2, j)];
    }
    case DType::Q2_K: {  // scales[16] qs[64] d dmin
      const uint8_t* b = row + 84 * (i / 256);
      const int q = (b[16 + 32 * (c / 4) + l] >> (2 * (c % 4))) & 3;
      return half_at(b + 80) * (b[sub] & 15) * q - half_at(b + 82) * (b[sub] >> 4);
    }
    case DType::Q3_K: {  // hmask[32] qs[64] scales[12] d
      const uint8_t* b = row + 110 * (i / 256);
      const int low = (b[32 + 32 * (c / 4) + l] >> (2 * (c % 4))) & 3;
      const int q = low - ((b[l] >> c) & 1 ? 0 : 4);
      const uint8_t* s = b + 96;
      const int code = ((s[sub % 8] >> (4 * (sub / 8))) & 15) | ((s[8 + sub % 4] >> (2 * (sub / 4))) & 3) << 4;
      return half_at(b + 108) * (code - 32) * q;
    }
    case DType::Q4_K:    // d dmin scales[12] qs[128]
    case DType::Q5_K: {  // d dmin scales[12] qh[32] qs[128]
      const bool five = t == DType::Q5_K;
      const uint8_t* b = row + (five ? 176 : 144) * (i / 256);
      const uint8_t* qs = b + (five ? 48 : 16);
      int q = (qs[32 * (c / 2) + l] >> (4 * (c % 2))) & 15;
      if (five) q |= ((b[16 + l] >> c) & 1) << 4;
      return half_at(b) * k_code(b + 4, c, 0) * q - half_at(b + 2) * k_code(b + 4, c, 1);
    }
    case DType::Q6_K: {  // ql[128] qh[64] scales[16] d
      const uint8_t* b = row + 210 * (i / 256);
      const int h = c / 4, g = c % 4;
      const int low = (b[64 * h + 32 * (g % 2) + l] >> (4 * (g / 2))) & 15;
      const int high = (b[128 + 32 * h + l] >> (2 * g)) & 3;
      return half_at(b + 208) * int8_t(b[192 + sub]) * ((low | high << 4) - 32);
    }
    case DType::Q8_K: {  // f32 d, qs[256], bsums[16]
      const uint8_t* b = row + 292 * (i / 256);
      float d;
      std::memcpy(&d, b, 4);
      return double(d) * int8_t(b[4 + e]);
    }
    case DType::IQ4_XS: {  // d scales_h scales_l[4] qs[128]
      const uint8_t* b = row + 136 * (i / 256);
      const int code = ((b[4 + c / 2] >> (4 * (c % 2))) & 15) | ((u16(b + 2) >> (2 * c)) & 3) << 4;
      return half_at(b) * (code - 32) * kCodebook[nibble(b + 8 + 16 * c, l)];
    }
    default: return 0.0;  // the other types are decoded in reference.h
  }
}

}  // namespace ref_quants
}  // namespace flashserve::test
