// What the two integer-dot matmuls share (ops/matmul_q8.cpp reads weights in their file layout,
// ops/matmul_q8_packed.cpp in pack_rows_for_q8's): the 8-bit activation blocks, the lane sums and
// the fixed final reduction that make the two bit-identical.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/cpu/block_codec.h"
#include "kernels/cpu/matmul_tile.h"

namespace flashserve::kernels::FLASHSERVE_ISA::q8 {

constexpr int kBlock = 32;

// One block of a token's activations, x ~ d * q, with d times the sum of q over the block and over
// each half (offset terms multiply those).
struct ActBlock {
  float d;
  float s, s_lo, s_hi;
  int8_t q[kBlock];
};

// x [num_tokens][k] quantized block by block into a buffer of the calling thread, valid until its
// next call.
const ActBlock* quantize_rows(const float* x, int64_t num_tokens, int64_t k);

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
inline float half(uint16_t h) { return tile::half_scale(h); }
#else
inline float half(uint16_t h) { return codec::half_to_float(h); }
#endif

// Per dot product: eight float lanes for the even chunks and eight for the odd ones (two chains
// hide the FMA latency, and AVX-512 holds a pair of chunks in one register), the offset terms in
// chunk order, then this fixed reduction.
inline float reduce_lanes(const float (&even)[8], const float (&odd)[8], float off) {
  float l[8];
  for (int i = 0; i < 8; ++i) l[i] = even[i] + odd[i];
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])) + off;
}

#if defined(__AVX512BW__)
// Lane i = sum over bytes 4i .. 4i+3 of w * x, exact (a pair of products fits int16: at most
// 2 * 128 * 127; VNNI sums the four in int32 directly).
inline __m512i lane_sums(__m512i w_u8, __m512i x_s8) {
#if defined(__AVX512VNNI__)
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w_u8, x_s8);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(w_u8, x_s8), _mm512_set1_epi16(1));
#endif
}
// The same for signed weight codes: |w| times x with w's sign.
inline __m512i signed_lane_sums(__m512i w, __m512i x) {
  const __mmask64 negative = _mm512_movepi8_mask(w);
  return lane_sums(_mm512_abs_epi8(w), _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x));
}
#elif defined(FLASHSERVE_AVX2)
inline __m256i lane_sums(__m256i w_u8, __m256i x_s8) {
#if defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w_u8, x_s8);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w_u8, x_s8), _mm256_set1_epi16(1));
#endif
}
inline __m256i signed_lane_sums(__m256i w, __m256i x) {
  return lane_sums(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}
#endif

#if defined(__AVX512BW__) || defined(FLASHSERVE_AVX2)
// Lane sums for a format whose codes are signed, or not (0..63).
template <bool kSigned, class Vec>
inline Vec code_lane_sums(Vec w, Vec x) {
  if constexpr (kSigned) return signed_lane_sums(w, x);
  return lane_sums(w, x);
}
#endif

}  // namespace flashserve::kernels::FLASHSERVE_ISA::q8
