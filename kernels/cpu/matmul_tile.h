// The tiled dot-product engine behind kernels::matmul, templated on a weight decoder, and the
// byte-unpacking helpers the decoders share. matmul.cpp holds the float and 32-element block
// decoders, matmul_kquants.cpp the 256-element super-block ones.
//
// Batch invariance comes from one rule: the dot product of token t with weight row o is always
// accumulated in the same per-lane order -- lane j of one 16-lane accumulator takes elements j,
// j + 16, j + 32, ... with one fma each, then simd::reduce_add's tree sums the lanes; the same rule
// in every compiled copy makes them agree bit for bit too. Tiles of several rows and tokens only
// interleave independent dot products (to reuse a decoded chunk across tokens and to hide FMA
// latency), so tile shapes, token counts and thread counts never change a result bit.
//
// A decoder D provides kQuantized, kElems (elements per block: 32, or 256 for super-blocks; float
// types step 32 elements at a time), kBytes (bytes per block) and decode(block, chunk, w), which
// expands elements [32 chunk, 32 chunk + 32) of the block into kVecs vectors equal to
// dequantize_row's values bit for bit. Float types also provide elem(p, i) for a row's tail.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/kquant_codec.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "kernels/dtype.h"

namespace flashserve::kernels::FLASHSERVE_ISA::tile {

using namespace simd;

constexpr int kChunk = 32;
constexpr int kVecs = kChunk / W;  // vectors per 32-element chunk

// Tile shapes: rows decoded together, tokens sharing each decoded chunk. Sized so the R * T
// accumulators, R * kVecs decoded weights and an x vector fit the register file (32 zmm; 16 ymm,
// where a vector is two); with AVX-512 four rows in flight hide FMA latency.
#if defined(FLASHSERVE_AVX512)
constexpr int kRowsSingle = 4, kRowsBatch = 4, kTokens = 4;
#elif defined(FLASHSERVE_AVX2)
constexpr int kRowsSingle = 2, kRowsBatch = 1, kTokens = 4;
#else
constexpr int kRowsSingle = 1, kRowsBatch = 1, kTokens = 4;
#endif

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
inline float half_scale(uint16_t h) { return _cvtsh_ss(h); }

inline __m256i load_bytes32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 16-bit lanes shifted right by a run-time count (bytes are masked by the caller).
inline __m256i shift_right(__m256i v, int n) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }

// 16 bytes of packed nibbles -> 32 byte values: low nibbles are elements 0..15, high 16..31.
inline __m256i nibble_bytes(const uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask), _mm_and_si128(bytes, mask));
}

// Byte j is `value` where bit j of `bits` is set, else 0.
inline __m256i bit_bytes(uint32_t bits, char value) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int(bits)), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                                     2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i mask = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask), _mm256_set1_epi8(value));
}

// Byte l is `value` where bit `bit` of bytes[l] is set, else 0.
inline __m256i bit_of_bytes(__m256i bytes, int bit, char value) {
  const __m256i mask = _mm256_set1_epi8(char(1 << bit));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, mask), mask), _mm256_set1_epi8(value));
}

// 4-bit indices -> the IQ4 codebook values (int8), byte by byte.
inline __m256i iq4_lookup(__m256i nibbles) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4Values));
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), nibbles);
}

// Each quantized format's 32 codes of a chunk as bytes, shared by the float decoders
// (matmul.cpp, matmul_kquants.cpp) and the integer dots (matmul_q8.cpp).

// Q5_0 / Q5_1: four low bits from the nibbles, the fifth from qh; 0..31.
inline __m256i q5_bytes(const uint8_t* qs, const uint8_t* qh) {
  return _mm256_or_si256(nibble_bytes(qs), bit_bytes(codec::load_u32(qh), 16));
}

// The 2-bit fields of Q2_K / Q3_K chunk c.
inline __m256i two_bit_quants(const uint8_t* qs, int c) {
  return _mm256_and_si256(shift_right(load_bytes32(qs + 32 * (c / 4)), 2 * (c % 4)), _mm256_set1_epi8(3));
}

// Q3_K chunk c: q = low - 4, plus 4 back where the hmask bit is set; -4..3.
inline __m256i q3k_bytes(const BlockQ3_K& b, int c) {
  const __m256i low = _mm256_add_epi8(two_bit_quants(b.qs, c), bit_of_bytes(load_bytes32(b.hmask), c, 4));
  return _mm256_sub_epi8(low, _mm256_set1_epi8(4));
}

// The low four bits of Q4_K / Q5_K chunk c.
template <class Block>
inline __m256i k_nibbles(const Block& b, int c) {
  return _mm256_and_si256(shift_right(load_bytes32(b.qs + 32 * (c / 2)), 4 * (c % 2)), _mm256_set1_epi8(0x0f));
}

inline __m256i q5k_bytes(const BlockQ5_K& b, int c) {
  return _mm256_or_si256(k_nibbles(b, c), bit_of_bytes(load_bytes32(b.qh), c, 16));
}

// Q6_K chunk c: q - 32, -32..31.
inline __m256i q6k_bytes(const BlockQ6_K& b, int c) {
  const int h = c / 4, g = c % 4;
  const __m256i lo = _mm256_and_si256(shift_right(load_bytes32(b.ql + 64 * h + 32 * (g % 2)), 4 * (g / 2)),
                                      _mm256_set1_epi8(0x0f));
  const __m256i hi = _mm256_and_si256(shift_right(load_bytes32(b.qh + 32 * h), 2 * g), _mm256_set1_epi8(3));
  // hi < 4, so shifting 16-bit lanes by 4 cannot carry into the neighbouring byte.
  return _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi8(32));
}

// A chunk's 32 byte values (signed or unsigned) as kVecs float vectors.
template <bool kSigned>
inline void widen_bytes(__m256i q, V* w) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
#if defined(FLASHSERVE_AVX512)
  w[0] = _mm512_cvtepi32_ps(kSigned ? _mm512_cvtepi8_epi32(lo) : _mm512_cvtepu8_epi32(lo));
  w[1] = _mm512_cvtepi32_ps(kSigned ? _mm512_cvtepi8_epi32(hi) : _mm512_cvtepu8_epi32(hi));
#else
  auto widen8 = [](__m128i b) { return _mm256_cvtepi32_ps(kSigned ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b)); };
  w[0] = {widen8(lo), widen8(_mm_srli_si128(lo, 8))};
  w[1] = {widen8(hi), widen8(_mm_srli_si128(hi, 8))};
#endif
}
#endif

// Formats with a scale per 16 elements: vector i of a chunk lies in its first or its second half.
inline float half_pick(int i, float first, float second) { return i < kVecs / 2 ? first : second; }

// The last k % 32 elements of a float-typed row, zero-padded so they run through the same FMAs.
template <class D>
void decode_tail(const char* p, int n, V* w) {
  alignas(64) float tmp[kChunk] = {};
  for (int i = 0; i < n; ++i) tmp[i] = D::elem(p, i);
  for (int i = 0; i < kVecs; ++i) w[i] = load(tmp + i * W);
}

// y[t * n_out + r] = x[t] . W[r] for R rows starting at w and T tokens starting at x.
template <class D, int R, int T>
void dot_tile(const char* w, size_t rb, const float* x, int64_t k, float* y, int64_t n_out) {
  V acc[T][R];
  for (auto& per_tok : acc)
    for (V& a : per_tok) a = zero();

  auto accumulate = [&](const V (&wv)[R][kVecs], int64_t off, int valid) {
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < kVecs; ++i) {
        const float* xp = x + t * k + off + i * W;
        const V xv = valid == kChunk ? load(xp) : load_partial(xp, valid - i * W);
        for (int r = 0; r < R; ++r) acc[t][r] = fma(xv, wv[r][i], acc[t][r]);
      }
    }
  };

  auto chunk = [&](int64_t b, int c) {
    V wv[R][kVecs];
    for (int r = 0; r < R; ++r) D::decode(w + r * rb + b * D::kBytes, c, wv[r]);
    accumulate(wv, b * D::kElems + c * kChunk, kChunk);
  };
  constexpr int kChunksPerBlock = D::kElems / kChunk;
  const int64_t nb = k / D::kElems;
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (T == 1) {
      // Unrolled, chunk indices are constants: bit positions fold and a super-block's scales load
      // once (Q6_K's d sits on the block's last cache line: about 2x at one token). With a token
      // tile the unrolled body runs out of registers instead (Q3_K 1.5x slower).
#pragma GCC unroll 8
      for (int c = 0; c < kChunksPerBlock; ++c) chunk(b, c);
    } else {
      for (int c = 0; c < kChunksPerBlock; ++c) chunk(b, c);
    }
  }
  if constexpr (!D::kQuantized) {
    if (const int tail = int(k - nb * D::kElems); tail > 0) {
      V wv[R][kVecs];
      for (int r = 0; r < R; ++r) decode_tail<D>(w + r * rb + nb * D::kBytes, tail, wv[r]);
      accumulate(wv, nb * D::kElems, tail);
    }
  }

  float sums[T * R];
  reduce_add_many(&acc[0][0], T * R, sums);
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) y[t * n_out + r] = sums[t * R + r];
  }
}

// All tokens against R consecutive rows: full tiles of kTokens, then tiles of 4, 2 and 1.
template <class D, int R>
void row_group(const char* w, size_t rb, const float* x, int64_t num_tokens, int64_t k, float* y,
               int64_t n_out) {
  int64_t t = 0;
  for (; t + kTokens <= num_tokens; t += kTokens)
    dot_tile<D, R, kTokens>(w, rb, x + t * k, k, y + t * n_out, n_out);
  if constexpr (kTokens > 4) {
    if (t + 4 <= num_tokens) { dot_tile<D, R, 4>(w, rb, x + t * k, k, y + t * n_out, n_out); t += 4; }
  }
  if (t + 2 <= num_tokens) { dot_tile<D, R, 2>(w, rb, x + t * k, k, y + t * n_out, n_out); t += 2; }
  if (t < num_tokens) dot_tile<D, R, 1>(w, rb, x + t * k, k, y + t * n_out, n_out);
}

// Asks for the weights of the row group kPrefetchGroups ahead while this one is computed: a thread's
// rows are one sequential stream, yet the hardware prefetcher alone left the 30 MB Q8_0 output head
// at 11 GB/s of a 40 GB/s machine (bench_kernels: 2.70 ms, 1.69 ms with this; SmolLM2 decode at 128
// cached, 8-bit activations, three alternating rounds: 8.1-10.1 ms without, 6.8-7.6 ms with).
constexpr int64_t kPrefetchGroups = 4;
inline void prefetch_rows(const char* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off);
}

// Threads take contiguous runs of R-row groups (Split::Runs); the < R leftover rows follow.
template <class D, int R>
void matmul_rows(const float* x, int64_t num_tokens, int64_t k, const char* w, size_t rb,
                 int64_t n_out, float* y) {
  const int64_t groups = n_out / R;
  parallel_for(groups, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      if (g + kPrefetchGroups < end) prefetch_rows(w + (g + kPrefetchGroups) * R * rb, R * rb);
      row_group<D, R>(w + g * R * rb, rb, x, num_tokens, k, y + g * R, n_out);
    }
  });
  for (int64_t o = groups * R; o < n_out; ++o)
    row_group<D, 1>(w + o * rb, rb, x, num_tokens, k, y + o, n_out);
}

template <class D>
void matmul_typed(const float* x, int64_t num_tokens, int64_t k, const char* w, size_t rb,
                  int64_t n_out, float* y) {
  // One token: more rows per tile for latency hiding; several: fewer rows, more tokens per chunk.
  if (num_tokens == 1)
    matmul_rows<D, kRowsSingle>(x, num_tokens, k, w, rb, n_out, y);
  else
    matmul_rows<D, kRowsBatch>(x, num_tokens, k, w, rb, n_out, y);
}

// matmul for the super-block types (matmul_kquants.cpp); k is already checked.
void matmul_super_blocks(const float* x, int64_t num_tokens, int64_t k, const char* w, DType wtype,
                         size_t rb, int64_t n_out, float* y);

}  // namespace flashserve::kernels::FLASHSERVE_ISA::tile
