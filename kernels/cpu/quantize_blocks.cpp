#include "kernels/cpu/quantize_blocks.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/cpu/block_codec.h"

namespace flashserve::kernels::FLASHSERVE_ISA::codec {
namespace {

// The value of largest magnitude, sign kept.
float signed_extreme(const float* x, int n) {
  float e = 0.0f;
  for (int j = 0; j < n; ++j)
    if (std::fabs(x[j]) > std::fabs(e)) e = x[j];
  return e;
}

int round_clamp(float v, int lo, int hi) { return int(std::lround(std::clamp(v, float(lo), float(hi)))); }

// q ~ x / scale within [lo, hi]; a zero scale decodes to zero whatever q is.
int quant(float x, float scale, int lo, int hi) {
  return scale != 0.0f ? round_clamp(x / scale, lo, hi) : std::clamp(0, lo, hi);
}

// Element j goes to the low nibble of byte j, element j + 16 to the high one.
void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(q[j] | q[j + 16] << 4);
}

void pack_q5(const int* q, uint8_t* qs, uint8_t* qh) {
  int lo[32];
  uint32_t bits = 0;
  for (int j = 0; j < 32; ++j) {
    lo[j] = q[j] & 15;
    bits |= uint32_t(q[j] >> 4) << j;
  }
  pack_nibbles(lo, qs);
  std::memcpy(qh, &bits, 4);
}

// Index of the codebook value nearest v.
int nearest_iq4(float v) {
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::fabs(v - float(kIQ4Values[i])) < std::fabs(v - float(kIQ4Values[best]))) best = i;
  return best;
}

// Codes ~ v[i] / d within [lo, hi] for one f16 d that maps the largest |v| to hi; returns d. The
// codes are fitted to the rounded d, the one decoding will see.
uint16_t fit_scales(const float* v, int n, int lo, int hi, int* codes) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(v[i]));
  const uint16_t dh = float_to_half(std::min(amax / float(hi), 65504.0f));
  const float d = half_to_float(dh);
  for (int i = 0; i < n; ++i) codes[i] = d > 0.0f ? round_clamp(v[i] / d, lo, hi) : 0;
  return dh;
}

// Asymmetric sub-blocks (Q2_K, Q4_K, Q5_K): x ~ d sc_i q - dmin m_i with q in [0, q_max]. A
// sub-block spans [min(0, lowest), highest], because the format can only subtract its offset.
struct AffineCodes {
  uint16_t d, dmin;
  int sc[16], m[16], q[256];
};

AffineCodes fit_affine(const float* x, int num_sub, int q_max, int code_max) {
  const int len = int(kSuperBlock) / num_sub;
  float scale[16], offset[16];
  for (int i = 0; i < num_sub; ++i) {
    const float* s = x + i * len;
    float lo = 0.0f, hi = s[0];
    for (int j = 0; j < len; ++j) { lo = std::min(lo, s[j]); hi = std::max(hi, s[j]); }
    scale[i] = (hi - lo) / float(q_max);
    offset[i] = -lo;
  }
  AffineCodes c;
  c.d = fit_scales(scale, num_sub, 0, code_max, c.sc);
  c.dmin = fit_scales(offset, num_sub, 0, code_max, c.m);
  const float d = half_to_float(c.d), dmin = half_to_float(c.dmin);
  for (int e = 0; e < kSuperBlock; ++e) {
    const int i = e / len;
    c.q[e] = quant(x[e] + dmin * float(c.m[i]), d * float(c.sc[i]), 0, q_max);
  }
  return c;
}

// Symmetric sub-blocks (Q3_K, Q6_K, IQ4_XS): as in Q4_0, each sub-block's signed extreme maps to
// the most negative level `q_min`, which the other side cannot reach.
struct SymmetricCodes {
  uint16_t d;
  int sc[16];
  float scale[16];  // d * sc, exactly as decoding computes it
};

SymmetricCodes fit_symmetric(const float* x, int num_sub, float q_min, int code_lo, int code_hi) {
  const int len = int(kSuperBlock) / num_sub;
  float s[16];
  for (int i = 0; i < num_sub; ++i) s[i] = signed_extreme(x + i * len, len) / q_min;
  SymmetricCodes c;
  c.d = fit_scales(s, num_sub, code_lo, code_hi, c.sc);
  for (int i = 0; i < num_sub; ++i) c.scale[i] = half_to_float(c.d) * float(c.sc[i]);
  return c;
}

void pack_k_scales(const int* sc, const int* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = uint8_t(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = uint8_t(m[j] | (m[j + 4] >> 4) << 6);
    s[j + 8] = uint8_t((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
  }
}

}  // namespace

// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 follow ggml's *_ref functions, including their truncating
// "+ 0.5" rounding and the use of the unrounded f32 scale, so files we write match llama.cpp's.
void quantize_block(const float* x, BlockQ4_0& y) {
  const float max = signed_extreme(x, 32);
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = float_to_half(d);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, int(int8_t(x[j] * id + 8.5f)));
    const int hi = std::min(15, int(int8_t(x[j + 16] * id + 8.5f)));
    y.qs[j] = uint8_t(lo | (hi << 4));
  }
}

void quantize_block(const float* x, BlockQ4_1& y) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < 32; ++j) { min = std::min(min, x[j]); max = std::max(max, x[j]); }
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = float_to_half(d);
  y.m = float_to_half(min);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, int(int8_t((x[j] - min) * id + 0.5f)));
    const int hi = std::min(15, int(int8_t((x[j + 16] - min) * id + 0.5f)));
    y.qs[j] = uint8_t(lo | (hi << 4));
  }
}

void quantize_block(const float* x, BlockQ5_0& y) {
  const float d = signed_extreme(x, 32) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = float_to_half(d);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = std::min(31, int(int8_t(x[j] * id + 16.5f)));
  pack_q5(q, y.qs, y.qh);
}

void quantize_block(const float* x, BlockQ5_1& y) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < 32; ++j) { min = std::min(min, x[j]); max = std::max(max, x[j]); }
  const float d = (max - min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = float_to_half(d);
  y.m = float_to_half(min);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = std::min(31, int(int8_t((x[j] - min) * id + 0.5f)));
  pack_q5(q, y.qs, y.qh);
}

void quantize_block(const float* x, BlockIQ4_NL& y) {
  y.d = float_to_half(signed_extreme(x, 32) / float(kIQ4Values[0]));
  const float d = half_to_float(y.d);
  int q[32];
  for (int j = 0; j < 32; ++j) q[j] = nearest_iq4(d != 0.0f ? x[j] / d : 0.0f);
  pack_nibbles(q, y.qs);
}

void quantize_block(const float* x, BlockQ2_K& y) {
  const AffineCodes c = fit_affine(x, 16, 3, 15);
  std::memset(&y, 0, sizeof y);
  y.d = c.d;
  y.dmin = c.dmin;
  for (int i = 0; i < 16; ++i) y.scales[i] = uint8_t(c.sc[i] | c.m[i] << 4);
  for (int e = 0; e < kSuperBlock; ++e) {
    const int ch = e / 32, l = e % 32;
    y.qs[32 * (ch / 4) + l] |= uint8_t(c.q[e] << (2 * (ch % 4)));
  }
}

void quantize_block(const float* x, BlockQ3_K& y) {
  const SymmetricCodes c = fit_symmetric(x, 16, -4.0f, -32, 31);
  std::memset(&y, 0, sizeof y);
  y.d = c.d;
  for (int i = 0; i < 16; ++i) {
    const int u = c.sc[i] + 32;
    y.scales[i % 8] |= uint8_t((u & 15) << (4 * (i / 8)));
    y.scales[8 + i % 4] |= uint8_t((u >> 4) << (2 * (i / 4)));
  }
  for (int e = 0; e < kSuperBlock; ++e) {
    const int u = quant(x[e], c.scale[e / 16], -4, 3) + 4;  // hmask holds bit 2: set for q >= 0
    const int ch = e / 32, l = e % 32;
    y.qs[32 * (ch / 4) + l] |= uint8_t((u & 3) << (2 * (ch % 4)));
    y.hmask[l] |= uint8_t((u >> 2) << ch);
  }
}

// Q4_K and Q5_K share their header: d, dmin and eight 6-bit scale/min pairs; codes up to q_max.
template <class Block>
AffineCodes start_k_block(const float* x, int q_max, Block& y) {
  const AffineCodes c = fit_affine(x, 8, q_max, 63);
  std::memset(&y, 0, sizeof y);
  y.d = c.d;
  y.dmin = c.dmin;
  pack_k_scales(c.sc, c.m, y.scales);
  return c;
}

void quantize_block(const float* x, BlockQ4_K& y) {
  const AffineCodes c = start_k_block(x, 15, y);
  for (int e = 0; e < kSuperBlock; ++e) {
    const int ch = e / 32, l = e % 32;
    y.qs[32 * (ch / 2) + l] |= uint8_t(c.q[e] << (4 * (ch % 2)));
  }
}

void quantize_block(const float* x, BlockQ5_K& y) {
  const AffineCodes c = start_k_block(x, 31, y);
  for (int e = 0; e < kSuperBlock; ++e) {
    const int ch = e / 32, l = e % 32;
    y.qs[32 * (ch / 2) + l] |= uint8_t((c.q[e] & 15) << (4 * (ch % 2)));
    y.qh[l] |= uint8_t((c.q[e] >> 4) << ch);
  }
}

void quantize_block(const float* x, BlockQ6_K& y) {
  const SymmetricCodes c = fit_symmetric(x, 16, -32.0f, -128, 127);
  std::memset(&y, 0, sizeof y);
  y.d = c.d;
  for (int i = 0; i < 16; ++i) y.scales[i] = int8_t(c.sc[i]);
  for (int e = 0; e < kSuperBlock; ++e) {
    const int u = quant(x[e], c.scale[e / 16], -32, 31) + 32;
    const int ch = e / 32, l = e % 32, h = ch / 4, g = ch % 4;
    y.ql[64 * h + 32 * (g % 2) + l] |= uint8_t((u & 15) << (4 * (g / 2)));
    y.qh[32 * h + l] |= uint8_t((u >> 4) << (2 * g));
  }
}

void quantize_block(const float* x, BlockQ8_K& y) {
  float amax = 0.0f;
  for (int j = 0; j < kSuperBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  y.d = amax / 127.0f;
  for (int j = 0; j < kSuperBlock; ++j) y.qs[j] = int8_t(quant(x[j], y.d, -127, 127));
  for (int i = 0; i < 16; ++i) {
    int sum = 0;
    for (int j = 0; j < 16; ++j) sum += y.qs[16 * i + j];
    y.bsums[i] = int16_t(sum);
  }
}

void quantize_block(const float* x, BlockIQ4_XS& y) {
  const SymmetricCodes c = fit_symmetric(x, 8, float(kIQ4Values[0]), -32, 31);
  std::memset(&y, 0, sizeof y);
  y.d = c.d;
  for (int ch = 0; ch < 8; ++ch) {
    const int u = c.sc[ch] + 32;
    y.scales_l[ch / 2] |= uint8_t((u & 15) << (4 * (ch % 2)));
    y.scales_h = uint16_t(y.scales_h | (u >> 4) << (2 * ch));
    int q[32];
    for (int l = 0; l < 32; ++l) q[l] = nearest_iq4(c.scale[ch] != 0.0f ? x[32 * ch + l] / c.scale[ch] : 0.0f);
    pack_nibbles(q, y.qs + 16 * ch);
  }
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA::codec
