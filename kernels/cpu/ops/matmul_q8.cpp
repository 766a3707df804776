// matmul_q8 (kernels/matmul.h): each token's activations quantized once to 8-bit blocks, then
// integer dot products with the weights' codes, for every quantized format. A format is seen as
// 32-element chunks: 32 integer codes, a scale for each 16-element half (one value for most
// formats) and an optional offset, with value = code * scale + offset. The integer part of a
// chunk's dot is exact, so every instruction set computes the same sums (the whole chunk's, or each
// half's where the halves' scales differ); the floats that follow run in one fixed order per dot
// product, which keeps results bit-identical across batch shapes, thread counts and the scalar and
// vector code.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/block_codec.h"
#include "kernels/cpu/kquant_codec.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/cpu/q8_dot.h"
#include "kernels/matmul.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"

namespace flashserve::kernels::FLASHSERVE_ISA {
namespace {

using q8::ActBlock;
using q8::half;
using q8::kBlock;

// A 32-element chunk's scale and offset.
struct ChunkScales {
  float scale, off = 0.0f;
};

enum class Offset {
  None,
  Chunk,   // the 32-element formats: fma(off, activations' s); the super-scaled: a minimum a chunk
  Halves,  // the super-scaled Q2_K: a minimum for each 16-element half
};

// Each format: its stored block, chunks per block, whether codes are signed (else 0..63), whether
// the halves' scales differ (super-scaled formats only), its offset, and per chunk c: scales, code
// of element e, and (vector builds) all 32 codes as bytes. The super-scaled ones (q8::super_scaled)
// give their chunks' integer scales (ints) and the block's d and -dmin instead of scales.
template <class B, int kPerBlock, bool kSignedCodes, bool kHalves, Offset kOff>
struct Format {
  using Block = B;
  static constexpr int kChunks = kPerBlock;
  static constexpr bool kSigned = kSignedCodes, kHalfScales = kHalves;
  static constexpr Offset kOffset = kOff;
  static constexpr bool kSuper = false;
};

// A super-scaled chunk's integer scales and minimums, of elements 0..15 and 16..31.
struct IntScales {
  int lo, hi, m_lo = 0, m_hi = 0;
};

// A format's codes by its block: every block type has one.
template <class B>
struct Codes;

template <>
struct Codes<BlockQ8_0> : Format<BlockQ8_0, 1, true, false, Offset::None> {
  static ChunkScales scales(const Block& b, int) { return {half(b.d)}; }
  static int code(const Block& b, int, int e) { return b.qs[e]; }
};

// sum (u - 8) q = sum u q - 8 sum q
template <>
struct Codes<BlockQ4_0> : Format<BlockQ4_0, 1, false, false, Offset::Chunk> {
  static ChunkScales scales(const Block& b, int) {
    const float d = half(b.d);
    return {d, -8.0f * d};
  }
  static int code(const Block& b, int, int e) { return e < 16 ? b.qs[e] & 0x0f : b.qs[e - 16] >> 4; }
};

template <>
struct Codes<BlockQ4_1> : Format<BlockQ4_1, 1, false, false, Offset::Chunk> {
  static ChunkScales scales(const Block& b, int) { return {half(b.d), half(b.m)}; }
  static int code(const Block& b, int, int e) { return e < 16 ? b.qs[e] & 0x0f : b.qs[e - 16] >> 4; }
};

template <class Block>
int q5_code(const Block& b, int e) {
  return (e < 16 ? b.qs[e] & 0x0f : b.qs[e - 16] >> 4) | int((codec::load_u32(b.qh) >> e) & 1) << 4;
}

template <>
struct Codes<BlockQ5_0> : Format<BlockQ5_0, 1, true, false, Offset::None> {
  static ChunkScales scales(const Block& b, int) { return {half(b.d)}; }
  static int code(const Block& b, int, int e) { return q5_code(b, e) - 16; }
};

template <>
struct Codes<BlockQ5_1> : Format<BlockQ5_1, 1, false, false, Offset::Chunk> {
  static ChunkScales scales(const Block& b, int) { return {half(b.d), half(b.m)}; }
  static int code(const Block& b, int, int e) { return q5_code(b, e); }
};

template <>
struct Codes<BlockIQ4_NL> : Format<BlockIQ4_NL, 1, true, false, Offset::None> {
  static ChunkScales scales(const Block& b, int) { return {half(b.d)}; }
  static int code(const Block& b, int, int e) { return kIQ4Values[e < 16 ? b.qs[e] & 0x0f : b.qs[e - 16] >> 4]; }
};

// Q2_K's 16-element sub-blocks each have a scale and a minimum.
template <>
struct Codes<BlockQ2_K> : Format<BlockQ2_K, 8, false, true, Offset::Halves> {
  static constexpr bool kSuper = true;
  static IntScales ints(const Block& b, int c) {
    const int lo = b.scales[2 * c], hi = b.scales[2 * c + 1];
    return {lo & 0x0f, hi & 0x0f, lo >> 4, hi >> 4};
  }
  static float d(const Block& b) { return half(b.d); }
  static float neg_dmin(const Block& b) { return -half(b.dmin); }
  static int code(const Block& b, int c, int e) { return (b.qs[32 * (c / 4) + e] >> (2 * (c % 4))) & 3; }
};

template <>
struct Codes<BlockQ3_K> : Format<BlockQ3_K, 8, true, true, Offset::None> {
  static constexpr bool kSuper = true;
  static IntScales ints(const Block& b, int c) {
    return {q3k_scale_code(b.scales, 2 * c), q3k_scale_code(b.scales, 2 * c + 1)};
  }
  static float d(const Block& b) { return half(b.d); }
  static float neg_dmin(const Block&) { return 0.0f; }
  static int code(const Block& b, int c, int e) {
    return ((b.qs[32 * (c / 4) + e] >> (2 * (c % 4))) & 3) - ((b.hmask[e] >> c) & 1 ? 0 : 4);
  }
};

template <class B>
struct KCodes : Format<B, 8, false, false, Offset::Chunk> {
  static constexpr bool kSuper = true;
  static IntScales ints(const B& b, int c) {
    const ScaleMin s = k_scale_min(b.scales, c);
    return {s.sc, s.sc, s.m, s.m};
  }
  static float d(const B& b) { return half(b.d); }
  static float neg_dmin(const B& b) { return -half(b.dmin); }
};

template <>
struct Codes<BlockQ4_K> : KCodes<BlockQ4_K> {
  static int code(const BlockQ4_K& b, int c, int e) { return (b.qs[32 * (c / 2) + e] >> (4 * (c % 2))) & 0x0f; }
};

template <>
struct Codes<BlockQ5_K> : KCodes<BlockQ5_K> {
  static int code(const BlockQ5_K& b, int c, int e) {
    return ((b.qs[32 * (c / 2) + e] >> (4 * (c % 2))) & 0x0f) | ((b.qh[e] >> c) & 1) << 4;
  }
};

template <>
struct Codes<BlockQ6_K> : Format<BlockQ6_K, 8, true, true, Offset::None> {
  static constexpr bool kSuper = true;
  static IntScales ints(const Block& b, int c) { return {b.scales[2 * c], b.scales[2 * c + 1]}; }
  static float d(const Block& b) { return half(b.d); }
  static float neg_dmin(const Block&) { return 0.0f; }
  static int code(const Block& b, int c, int e) {
    const int h = c / 4, g = c % 4;
    const int lo = (b.ql[64 * h + 32 * (g % 2) + e] >> (4 * (g / 2))) & 0x0f;
    return (lo | ((b.qh[32 * h + e] >> (2 * g)) & 3) << 4) - 32;
  }
};

template <>
struct Codes<BlockQ8_K> : Format<BlockQ8_K, 8, true, false, Offset::None> {
  static ChunkScales scales(const Block& b, int) { return {b.d}; }
  static int code(const Block& b, int c, int e) { return b.qs[32 * c + e]; }
};

template <>
struct Codes<BlockIQ4_XS> : Format<BlockIQ4_XS, 8, true, false, Offset::None> {
  static constexpr bool kSuper = true;
  static IntScales ints(const Block& b, int c) {
    const int s = iq4xs_scale_code(b.scales_l[c / 2], b.scales_h, c);
    return {s, s};
  }
  static float d(const Block& b) { return half(b.d); }
  static float neg_dmin(const Block&) { return 0.0f; }
  static int code(const Block& b, int c, int e) {
    const uint8_t* qs = b.qs + 16 * c;
    return kIQ4Values[e < 16 ? qs[e] & 0x0f : qs[e - 16] >> 4];
  }
};

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
// All 32 codes of chunk c as bytes, the same values as C::code.
template <class C>
inline __m256i weight_codes(const typename C::Block& b, int c) {
  using B = typename C::Block;
  if constexpr (std::is_same_v<B, BlockQ8_0>) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  if constexpr (std::is_same_v<B, BlockQ4_0> || std::is_same_v<B, BlockQ4_1>) return tile::nibble_bytes(b.qs);
  if constexpr (std::is_same_v<B, BlockQ5_0>) return _mm256_sub_epi8(tile::q5_bytes(b.qs, b.qh), _mm256_set1_epi8(16));
  if constexpr (std::is_same_v<B, BlockQ5_1>) return tile::q5_bytes(b.qs, b.qh);
  if constexpr (std::is_same_v<B, BlockIQ4_NL>) return tile::iq4_lookup(tile::nibble_bytes(b.qs));
  if constexpr (std::is_same_v<B, BlockQ2_K>) return tile::two_bit_quants(b.qs, c);
  if constexpr (std::is_same_v<B, BlockQ3_K>) return tile::q3k_bytes(b, c);
  if constexpr (std::is_same_v<B, BlockQ4_K>) return tile::k_nibbles(b, c);
  if constexpr (std::is_same_v<B, BlockQ5_K>) return tile::q5k_bytes(b, c);
  if constexpr (std::is_same_v<B, BlockQ6_K>) return tile::q6k_bytes(b, c);
  if constexpr (std::is_same_v<B, BlockQ8_K>) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
  }
  if constexpr (std::is_same_v<B, BlockIQ4_XS>) return tile::iq4_lookup(tile::nibble_bytes(b.qs + 16 * c));
}
#endif

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
// One field of four rows' chunk scales (rows past R: 0) as a vector.
template <int R>
inline __m128 row_vector(const ChunkScales (&s)[R], float ChunkScales::*field) {
  alignas(16) float v[4] = {};
  for (int r = 0; r < R; ++r) v[r] = s[r].*field;
  return _mm_load_ps(v);
}
#endif

// dot_tile for the super-scaled formats: per super-block, the int32 sums of the chunks' dots times
// their scales (and minimums times the sums of q: Q4_K's and Q5_K's a chunk's, Q2_K's a half's),
// then one fma each.
template <class C, int R, int T>
void super_dot_tile(const char* w, size_t rb, const ActBlock* a, int64_t nb, float* y, int64_t n_out) {
  using Block = typename C::Block;
  constexpr bool kMins = C::kOffset != Offset::None;
  auto block = [&](int r, int64_t b) -> const Block& { return reinterpret_cast<const Block*>(w + r * rb)[b / 8]; };
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
  // Row r in lane r, as dot_tile.
  __m128 acc[T], off[T];
  for (int t = 0; t < T; ++t) acc[t] = off[t] = _mm_setzero_ps();
  for (int64_t s = 0; s < nb; s += 8) {
    __m128i sums[T], mins[T];
    for (int t = 0; t < T; ++t) sums[t] = mins[t] = _mm_setzero_si128();
    for (int c = 0; c < 8; ++c) {
      __m256i wc[4];
      alignas(16) int32_t lo[4] = {}, hi[4] = {}, m_lo[4] = {}, m_hi[4] = {};
      for (int r = 0; r < 4; ++r) wc[r] = r < R ? weight_codes<C>(block(r, s), c) : _mm256_setzero_si256();
      for (int r = 0; r < R; ++r) {
        const IntScales sc = C::ints(block(r, s), c);
        lo[r] = sc.lo, hi[r] = sc.hi, m_lo[r] = sc.m_lo, m_hi[r] = sc.m_hi;
      }
      const __m128i scale_lo = _mm_load_si128(reinterpret_cast<const __m128i*>(lo));
      const __m128i scale_hi = _mm_load_si128(reinterpret_cast<const __m128i*>(hi));
      const __m128i min_lo = _mm_load_si128(reinterpret_cast<const __m128i*>(m_lo));
      const __m128i min_hi = _mm_load_si128(reinterpret_cast<const __m128i*>(m_hi));
      for (int t = 0; t < T; ++t) {
        const ActBlock& ab = a[t * nb + s + c];
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.q));
        __m256i l[4];
        for (int r = 0; r < 4; ++r) l[r] = q8::code_lane_sums<C::kSigned>(wc[r], xq);
        const __m256i halves = q8::quad_sums(l[0], l[1], l[2], l[3]);
        const __m128i sum_lo = _mm256_castsi256_si128(halves), sum_hi = _mm256_extracti128_si256(halves, 1);
        if constexpr (C::kHalfScales) {
          sums[t] = _mm_add_epi32(sums[t], _mm_add_epi32(_mm_mullo_epi32(sum_lo, scale_lo), _mm_mullo_epi32(sum_hi, scale_hi)));
        } else {
          sums[t] = _mm_add_epi32(sums[t], _mm_mullo_epi32(_mm_add_epi32(sum_lo, sum_hi), scale_lo));
        }
        if constexpr (C::kOffset == Offset::Chunk) {
          mins[t] = _mm_add_epi32(mins[t], _mm_mullo_epi32(min_lo, _mm_set1_epi32(ab.sum_lo + ab.sum_hi)));
        } else if constexpr (C::kOffset == Offset::Halves) {
          mins[t] = _mm_add_epi32(mins[t], _mm_add_epi32(_mm_mullo_epi32(min_lo, _mm_set1_epi32(ab.sum_lo)),
                                                         _mm_mullo_epi32(min_hi, _mm_set1_epi32(ab.sum_hi))));
        }
      }
    }
    alignas(16) float d[4] = {}, neg_dmin[4] = {};
    for (int r = 0; r < R; ++r) d[r] = C::d(block(r, s)), neg_dmin[r] = C::neg_dmin(block(r, s));
    for (int t = 0; t < T; ++t) {
      const __m128 xd = _mm_set1_ps(a[t * nb + s].d);
      acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(sums[t]), _mm_mul_ps(_mm_load_ps(d), xd), acc[t]);
      if constexpr (kMins) off[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(mins[t]), _mm_mul_ps(_mm_load_ps(neg_dmin), xd), off[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(16) float v[4];
    _mm_store_ps(v, _mm_add_ps(acc[t], off[t]));
    std::copy(v, v + R, y + t * n_out);
  }
#else
  float acc[T][R] = {}, off[T][R] = {};
  for (int64_t s = 0; s < nb; s += 8) {
    for (int r = 0; r < R; ++r) {
      const Block& blk = block(r, s);
      int32_t sums[T] = {}, mins[T] = {};
      for (int c = 0; c < 8; ++c) {
        const IntScales sc = C::ints(blk, c);
        int codes[kBlock];
        for (int e = 0; e < kBlock; ++e) codes[e] = C::code(blk, c, e);
        for (int t = 0; t < T; ++t) {
          const ActBlock& ab = a[t * nb + s + c];
          int32_t lo = 0, hi = 0;
          for (int e = 0; e < kBlock / 2; ++e) {
            lo += codes[e] * ab.q[e];
            hi += codes[e + kBlock / 2] * ab.q[e + kBlock / 2];
          }
          sums[t] += lo * sc.lo + hi * sc.hi;
          mins[t] += sc.m_lo * ab.sum_lo + sc.m_hi * ab.sum_hi;
        }
      }
      for (int t = 0; t < T; ++t) {
        const float xd = a[t * nb + s].d;
        acc[t][r] = std::fma(float(sums[t]), C::d(blk) * xd, acc[t][r]);
        if constexpr (kMins) off[t][r] = std::fma(float(mins[t]), C::neg_dmin(blk) * xd, off[t][r]);
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[t * n_out + r] = acc[t][r] + off[t][r];
#endif
}

// dot_tile for the rest: one fma per chunk.
template <class C, int R, int T>
void chunk_dot_tile(const char* w, size_t rb, const ActBlock* a, int64_t nb, float* y, int64_t n_out) {
  using Block = typename C::Block;
  static_assert(!C::kHalfScales && C::kOffset != Offset::Halves);
  auto block = [&](int r, int64_t b) -> const Block& {
    return reinterpret_cast<const Block*>(w + r * rb)[b / C::kChunks];
  };
  auto chunk = [](int64_t b) { return int(b % C::kChunks); };
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
  // Row r's sums in lane r of one vector per token; each lane's fmas are the scalar code's.
  __m128 sums[T], offs[T];
  for (int t = 0; t < T; ++t) sums[t] = offs[t] = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wc[4];
    ChunkScales sc[R];
    for (int r = 0; r < 4; ++r) wc[r] = r < R ? weight_codes<C>(block(r, b), chunk(b)) : _mm256_setzero_si256();
    for (int r = 0; r < R; ++r) sc[r] = C::scales(block(r, b), chunk(b));
    const __m128 scale = row_vector<R>(sc, &ChunkScales::scale), off = row_vector<R>(sc, &ChunkScales::off);
    for (int t = 0; t < T; ++t) {
      const ActBlock& ab = a[t * nb + b];
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.q));
      __m256i l[4];
      for (int r = 0; r < 4; ++r) l[r] = q8::code_lane_sums<C::kSigned>(wc[r], xq);
      const __m256i halves = q8::quad_sums(l[0], l[1], l[2], l[3]);
      const __m128i lo = _mm256_castsi256_si128(halves), hi = _mm256_extracti128_si256(halves, 1);
      const __m128 xd = _mm_set1_ps(ab.d);
      sums[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(_mm_add_epi32(lo, hi)), _mm_mul_ps(scale, xd), sums[t]);
      if constexpr (C::kOffset == Offset::Chunk) offs[t] = _mm_fmadd_ps(off, _mm_set1_ps(ab.s), offs[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(16) float v[4];
    _mm_store_ps(v, _mm_add_ps(sums[t], offs[t]));
    std::copy(v, v + R, y + t * n_out);
  }
#else
  float acc[T][R] = {}, off[T][R] = {};
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < R; ++r) {
      const Block& blk = block(r, b);
      const ChunkScales sc = C::scales(blk, chunk(b));
      int codes[kBlock];
      for (int e = 0; e < kBlock; ++e) codes[e] = C::code(blk, chunk(b), e);
      for (int t = 0; t < T; ++t) {
        const ActBlock& ab = a[t * nb + b];
        int32_t lo = 0, hi = 0;
        for (int e = 0; e < kBlock / 2; ++e) {
          lo += codes[e] * ab.q[e];
          hi += codes[e + kBlock / 2] * ab.q[e + kBlock / 2];
        }
        acc[t][r] = std::fma(float(lo + hi), sc.scale * ab.d, acc[t][r]);
        if constexpr (C::kOffset == Offset::Chunk) off[t][r] = std::fma(sc.off, ab.s, off[t][r]);
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[t * n_out + r] = acc[t][r] + off[t][r];
#endif
}

// y[t * n_out + r] for R (at most 4) weight rows from w and T tokens' activation blocks from a (nb
// chunks each).
template <class C, int R, int T>
void dot_tile(const char* w, size_t rb, const ActBlock* a, int64_t nb, float* y, int64_t n_out) {
  static_assert(R <= 4);
  if constexpr (C::kSuper) super_dot_tile<C, R, T>(w, rb, a, nb, y, n_out);
  else chunk_dot_tile<C, R, T>(w, rb, a, nb, y, n_out);
}

// Tile shape: rows that share a token's activation block, tokens that share a row's decoded codes
// (AVX-512's 32 registers hold twice AVX2's accumulators).
#if defined(FLASHSERVE_AVX512)
constexpr int kRows = 4, kTokens = 4;
#else
constexpr int kRows = 4, kTokens = 2;
#endif

template <class C, int R>
void row_group(const char* w, size_t rb, const ActBlock* a, int64_t num_tokens, int64_t nb, float* y, int64_t n_out) {
  int64_t t = 0;
  for (; t + kTokens <= num_tokens; t += kTokens) dot_tile<C, R, kTokens>(w, rb, a + t * nb, nb, y + t * n_out, n_out);
  for (; t + 2 <= num_tokens; t += 2) dot_tile<C, R, 2>(w, rb, a + t * nb, nb, y + t * n_out, n_out);
  if (t < num_tokens) dot_tile<C, R, 1>(w, rb, a + t * nb, nb, y + t * n_out, n_out);
}

template <class C>
void matmul_codes(const ActBlock* a, int64_t num_tokens, int64_t nb, const char* w, size_t rb, int64_t n_out, float* y) {
  const int64_t groups = n_out / kRows;
  parallel_for(groups, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      if (g + tile::kPrefetchGroups < end) tile::prefetch_rows(w + (g + tile::kPrefetchGroups) * kRows * rb, kRows * rb);
      row_group<C, kRows>(w + g * kRows * rb, rb, a, num_tokens, nb, y + g * kRows, n_out);
    }
  });
  for (int64_t o = groups * kRows; o < n_out; ++o) row_group<C, 1>(w + o * rb, rb, a, num_tokens, nb, y + o, n_out);
}

}  // namespace

namespace q8 {
namespace {

// The largest magnitude of 32 activations, NaN ignored. The vector versions compute the same
// value: max ignores NaN as std::max does in the scalar code (a NaN first operand yields the
// second).
float block_amax(const float* x) {
#if defined(FLASHSERVE_AVX512)
  const __m512 v[2] = {_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)};
  const __m512 m = _mm512_max_ps(_mm512_abs_ps(v[1]), _mm512_max_ps(_mm512_abs_ps(v[0]), _mm512_setzero_ps()));
  return _mm512_reduce_max_ps(m);
#elif defined(FLASHSERVE_AVX2)
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)), m);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
#else
  float amax = 0.0f;
  for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
#endif
}

// Codes of x / d with d = amax / 127: NaN becomes 0; the rest rounds to nearest even within
// [-127, 127] (so that negating never wraps). The vector versions compute the same values: every
// step is exact or rounded once the same way.
void quantize_block(const float* x, float amax, ActBlock& out) {
#if defined(FLASHSERVE_AVX512)
  const __m512 v[2] = {_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)};
#elif defined(FLASHSERVE_AVX2)
  __m256 v[4];
  for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(x + 8 * i);
#endif
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  int32_t sum[2] = {0, 0};
#if defined(FLASHSERVE_AVX512)
  for (int i = 0; i < 2; ++i) {
    const __m512 p = _mm512_mul_ps(v[i], _mm512_set1_ps(id));
    const __mmask16 number = _mm512_cmp_ps_mask(p, p, _CMP_ORD_Q);
    const __m512 c = _mm512_min_ps(_mm512_max_ps(p, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    const __m512i q = _mm512_maskz_cvtps_epi32(number, _mm512_roundscale_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out.q + 16 * i), _mm512_cvtepi32_epi8(q));
    sum[i] = _mm512_reduce_add_epi32(q);
  }
#elif defined(FLASHSERVE_AVX2)
  __m256i q[4];
  for (int i = 0; i < 4; ++i) {
    const __m256 p = _mm256_mul_ps(v[i], _mm256_set1_ps(id));
    const __m256 number = _mm256_cmp_ps(p, p, _CMP_ORD_Q);
    const __m256 c = _mm256_min_ps(_mm256_max_ps(p, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    const __m256 r = _mm256_round_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    q[i] = _mm256_cvttps_epi32(_mm256_and_ps(r, number));
  }
  for (int i = 0; i < 2; ++i) {
    const __m256i s8 = _mm256_add_epi32(q[2 * i], q[2 * i + 1]);
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
    s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
    sum[i] = _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1)));
  }
  // packs interleave 128-bit lanes; the permute puts the 32 bytes back in element order.
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.q),
                      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
#else
  for (int i = 0; i < kBlock; ++i) {
    const float v = x[i] * id;
    out.q[i] = std::isnan(v) ? 0 : int8_t(std::nearbyint(std::clamp(v, -127.0f, 127.0f)));
    sum[i / 16] += out.q[i];
  }
#endif
  out.d = d;
  out.s = d * float(sum[0] + sum[1]);
  out.sum_lo = int16_t(sum[0]);
  out.sum_hi = int16_t(sum[1]);
}

}  // namespace

const ActBlock* quantize_rows(const float* x, int64_t num_tokens, int64_t k, int64_t group, int64_t run) {
  const int64_t per_token = k / group, groups = num_tokens * per_token, per_group = group / kBlock;
  const int64_t nb = k / kBlock;
  // Reused across calls: a step's matmuls all fit the largest one's activations.
  thread_local std::vector<ActBlock> act;
  act.resize(size_t(groups * per_group));
  ActBlock* a = act.data();
  parallel_for(
      groups,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const float* xg = x + i * group;
          float amax = 0.0f;
          for (int64_t b = 0; b < per_group; ++b) amax = std::max(amax, block_amax(xg + b * kBlock));
          const int64_t t = i / per_token, first = t / run * run, n = std::min(run, num_tokens - first);
          ActBlock* out = a + first * nb + (i % per_token) * per_group * n + (t - first);
          for (int64_t b = 0; b < per_group; ++b) quantize_block(xg + b * kBlock, amax, out[b * n]);
        }
      },
      num_tokens * k >= (1 << 16));
  return a;
}

}  // namespace q8

void matmul_q8(const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype, int64_t n_out, float* y) {
  if (!matmul_q8_supports(wtype)) {
    throw_invalid_argument("matmul_q8: no integer dot product for %s", dtype_name(wtype).data());
  }
  if (k % block_elems(wtype) != 0) {
    throw_invalid_argument("matmul_q8: k=%lld is not whole blocks of %s", (long long)k, dtype_name(wtype).data());
  }
  if (num_tokens <= 0 || n_out <= 0) return;
  const int64_t nb = k / kBlock;
  const ActBlock* a = q8::quantize_rows(x, num_tokens, k, q8::super_scaled(wtype) ? kSuperBlock : kBlock);
  const auto* wb = static_cast<const char*>(w);
  const size_t rb = row_bytes(wtype, k);
  with_block(wtype, [&]<class B, int64_t>() { matmul_codes<Codes<B>>(a, num_tokens, nb, wb, rb, n_out, y); });
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
