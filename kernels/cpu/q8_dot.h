// What the two integer-dot matmuls share (ops/matmul_q8.cpp reads weights in their file layout,
// ops/matmul_q8_packed.cpp in pack_rows_for_q8's): the 8-bit activation blocks and the exact integer
// sums that make the two bit-identical.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/cpu/block_codec.h"
#include "kernels/cpu/matmul_tile.h"

namespace flashserve::kernels::FLASHSERVE_ISA::q8 {

constexpr int kBlock = 32;

// One block of a token's activations, x ~ d * q, with d times the sum of q over the block (offset
// terms multiply it), and the sums of q over each half (the super-scaled minimums and the packed
// kernels' code biases multiply those).
struct ActBlock {
  float d;
  float s;
  int16_t sum_lo, sum_hi;
  int8_t q[kBlock];
};

// The formats whose chunks' scales are small integers times one float per 256 elements: the
// K-quants but Q8_K, and IQ4_XS (Q8_K goes as the 32-element formats). Their activations take one
// d per 256 elements (as llama.cpp's Q8_K), so a super-block's chunk sums times their integer
// scales (and Q2_K's, Q4_K's and Q5_K's minimums times the sums of q) add up exactly in int32, and
// each dot takes one fma per super-block (two with minimums) instead of one per chunk.
inline bool super_scaled(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K ||
         t == DType::IQ4_XS;
}

// x [num_tokens][k] quantized block by block into a buffer of the calling thread, valid until its
// next call; the blocks of each `group` elements (32, or 256 for the super-scaled formats) share
// one d, that of the group's largest magnitude. Token t's block b lies at [t * k / 32 + b], or, with
// run > 1, the tokens go in runs of `run` (the last maybe shorter) whose blocks go chunk by chunk: a
// run of n tokens from token r holds token t's block b at [r * k / 32 + b * n + t - r].
const ActBlock* quantize_rows(const float* x, int64_t num_tokens, int64_t k, int64_t group, int64_t run = 1);

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
inline float half(uint16_t h) { return tile::half_scale(h); }
#else
inline float half(uint16_t h) { return codec::half_to_float(h); }
#endif

// Every copy computes a chunk's integer dot exactly, whole (or per 16-element half for the formats
// that scale halves apart), then adds it into one float accumulator per dot product with one fma by
// the weight scale times d, chunk after chunk; the offset terms collect in a second sum, added last.
// The super-scaled formats instead add, per super-block, the exact int32 sum of their chunks' (or
// halves') dots times the integer scales with one fma by the super-block's d times the
// activations' d; Q4_K and Q5_K their minimums' int32 sum (m times the chunk's sum of q) into the
// offsets with one fma by -dmin times the activations' d.

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
// acc + lane i = sum over bytes 4i .. 4i+3 of w * x, exact (a pair of products fits int16: at most
// 2 * 128 * 127; VNNI sums the four in int32 directly).
inline __m256i add_lane_sums(__m256i acc, __m256i w_u8, __m256i x_s8) {
#if defined(__AVX512VNNI__)
  return _mm256_dpbusd_epi32(acc, w_u8, x_s8);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(acc, w_u8, x_s8);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w_u8, x_s8), _mm256_set1_epi16(1)));
#endif
}
inline __m256i lane_sums(__m256i w_u8, __m256i x_s8) { return add_lane_sums(_mm256_setzero_si256(), w_u8, x_s8); }
// The same for signed weight codes: |w| times x with w's sign.
inline __m256i signed_lane_sums(__m256i w, __m256i x) {
  return lane_sums(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}
// Lane sums for a format whose codes are signed, or not (0..63).
template <bool kSigned>
inline __m256i code_lane_sums(__m256i w, __m256i x) {
  if constexpr (kSigned) return signed_lane_sums(w, x);
  return lane_sums(w, x);
}

// Four vectors of eight int32 lanes -> [a0-3, b0-3, c0-3, d0-3 | a4-7, b4-7, c4-7, d4-7], each the
// sum of those four lanes (exact, so the order of the additions does not matter).
inline __m256i quad_sums(__m256i a, __m256i b, __m256i c, __m256i d) {
  return _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
}
#endif

}  // namespace flashserve::kernels::FLASHSERVE_ISA::q8
