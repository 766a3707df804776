// matmul_q8 (kernels/matmul.h): each token's activations quantized once to 8-bit blocks, then
// integer dot products with the weights' codes, for every quantized format. A format is seen as
// 32-element chunks: 32 integer codes, a scale for each 16-element half (one value for most
// formats) and an optional offset, with value = code * scale + offset. The integer part of a
// chunk's dot is exact, so every instruction set computes the same eight lane sums (lane i:
// elements 4i .. 4i+3); the floats that follow run in one fixed order per dot product, which keeps
// results bit-identical across batch shapes, thread counts and the scalar and vector code.
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
using q8::reduce_lanes;

// A chunk's scale for lanes 0-3 (elements 0..15) and 4-7 (16..31), and its offsets.
struct ChunkScales {
  float lo, hi;
  float off_lo = 0.0f, off_hi = 0.0f;
};

enum class Offset {
  None,
  Chunk,   // fma(off_lo, activations' s)
  Halves,  // fma(off_lo, s_lo), then fma(off_hi, s_hi)
};

// Each format: its stored block, chunks per block, whether codes are signed (else 0..63), whether
// the halves' scales differ, its offset, and per chunk c: scales, code of element e, and (vector
// builds) all 32 codes as bytes.
template <class B, int kPerBlock, bool kSignedCodes, bool kHalves, Offset kOff>
struct Format {
  using Block = B;
  static constexpr int kChunks = kPerBlock;
  static constexpr bool kSigned = kSignedCodes, kHalfScales = kHalves;
  static constexpr Offset kOffset = kOff;
};

struct Q8_0Codes : Format<BlockQ8_0, 1, true, false, Offset::None> {
  static ChunkScales scales(const Block& b, int) { return {half(b.d), half(b.d)}; }
  static int code(const Block& b, int, int e) { return b.qs[e]; }
};

// sum (u - 8) q = sum u q - 8 sum q
struct Q4_0Codes : Format<BlockQ4_0, 1, false, false, Offset::Chunk> {
  static ChunkScales scales(const Block& b, int) {
    const float d = half(b.d);
    return {d, d, -8.0f * d};
  }
  static int code(const Block& b, int, int e) { return e < 16 ? b.qs[e] & 0x0f : b.qs[e - 16] >> 4; }
};

struct Q4_1Codes : Format<BlockQ4_1, 1, false, false, Offset::Chunk> {
  static ChunkScales scales(const Block& b, int) { return {half(b.d), half(b.d), half(b.m)}; }
  static int code(const Block& b, int, int e) { return e < 16 ? b.qs[e] & 0x0f : b.qs[e - 16] >> 4; }
};

template <class Block>
int q5_code(const Block& b, int e) {
  return (e < 16 ? b.qs[e] & 0x0f : b.qs[e - 16] >> 4) | int((codec::load_u32(b.qh) >> e) & 1) << 4;
}

struct Q5_0Codes : Format<BlockQ5_0, 1, true, false, Offset::None> {
  static ChunkScales scales(const Block& b, int) { return {half(b.d), half(b.d)}; }
  static int code(const Block& b, int, int e) { return q5_code(b, e) - 16; }
};

struct Q5_1Codes : Format<BlockQ5_1, 1, false, false, Offset::Chunk> {
  static ChunkScales scales(const Block& b, int) { return {half(b.d), half(b.d), half(b.m)}; }
  static int code(const Block& b, int, int e) { return q5_code(b, e); }
};

struct IQ4_NLCodes : Format<BlockIQ4_NL, 1, true, false, Offset::None> {
  static ChunkScales scales(const Block& b, int) { return {half(b.d), half(b.d)}; }
  static int code(const Block& b, int, int e) { return kIQ4Values[e < 16 ? b.qs[e] & 0x0f : b.qs[e - 16] >> 4]; }
};

// Q2_K's 16-element sub-blocks each have a scale and a minimum.
struct Q2_KCodes : Format<BlockQ2_K, 8, false, true, Offset::Halves> {
  static ChunkScales scales(const Block& b, int c) {
    const float d = half(b.d), dmin = half(b.dmin);
    const codec::Affine a0 = codec::q2k_affine(b, 2 * c, d, dmin), a1 = codec::q2k_affine(b, 2 * c + 1, d, dmin);
    return {a0.d, a1.d, -a0.m, -a1.m};
  }
  static int code(const Block& b, int c, int e) { return (b.qs[32 * (c / 4) + e] >> (2 * (c % 4))) & 3; }
};

struct Q3_KCodes : Format<BlockQ3_K, 8, true, true, Offset::None> {
  static ChunkScales scales(const Block& b, int c) {
    const float d = half(b.d);
    return {codec::q3k_scale(b, 2 * c, d), codec::q3k_scale(b, 2 * c + 1, d)};
  }
  static int code(const Block& b, int c, int e) {
    return ((b.qs[32 * (c / 4) + e] >> (2 * (c % 4))) & 3) - ((b.hmask[e] >> c) & 1 ? 0 : 4);
  }
};

template <class B>
struct KCodes : Format<B, 8, false, false, Offset::Chunk> {
  static ChunkScales scales(const B& b, int c) {
    const codec::Affine a = codec::k_affine(b, c, half(b.d), half(b.dmin));
    return {a.d, a.d, -a.m};
  }
};

struct Q4_KCodes : KCodes<BlockQ4_K> {
  static int code(const BlockQ4_K& b, int c, int e) { return (b.qs[32 * (c / 2) + e] >> (4 * (c % 2))) & 0x0f; }
};

struct Q5_KCodes : KCodes<BlockQ5_K> {
  static int code(const BlockQ5_K& b, int c, int e) {
    return ((b.qs[32 * (c / 2) + e] >> (4 * (c % 2))) & 0x0f) | ((b.qh[e] >> c) & 1) << 4;
  }
};

struct Q6_KCodes : Format<BlockQ6_K, 8, true, true, Offset::None> {
  static ChunkScales scales(const Block& b, int c) {
    const float d = half(b.d);
    return {codec::q6k_scale(b, 2 * c, d), codec::q6k_scale(b, 2 * c + 1, d)};
  }
  static int code(const Block& b, int c, int e) {
    const int h = c / 4, g = c % 4;
    const int lo = (b.ql[64 * h + 32 * (g % 2) + e] >> (4 * (g / 2))) & 0x0f;
    return (lo | ((b.qh[32 * h + e] >> (2 * g)) & 3) << 4) - 32;
  }
};

struct Q8_KCodes : Format<BlockQ8_K, 8, true, false, Offset::None> {
  static ChunkScales scales(const Block& b, int) { return {b.d, b.d}; }
  static int code(const Block& b, int c, int e) { return b.qs[32 * c + e]; }
};

struct IQ4_XSCodes : Format<BlockIQ4_XS, 8, true, false, Offset::None> {
  static ChunkScales scales(const Block& b, int c) {
    const float s = codec::iq4xs_scale(b, c, half(b.d));
    return {s, s};
  }
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

template <class C>
inline float add_offset(float off, const ChunkScales& s, const ActBlock& a) {
  if constexpr (C::kOffset == Offset::Chunk) return std::fma(s.off_lo, a.s, off);
  if constexpr (C::kOffset == Offset::Halves) return std::fma(s.off_hi, a.s_hi, std::fma(s.off_lo, a.s_lo, off));
  return off;
}

#if defined(__AVX512BW__)
inline __m512i pair(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m512 pair(float lo, float hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(lo)), _mm256_set1_ps(hi), 1);
}
// The lane scales of two chunks: four lanes per half.
template <class C>
inline __m512 pair(const ChunkScales& a, const ChunkScales& b) {
  if constexpr (!C::kHalfScales) return pair(a.lo, b.lo);
  const __m256 first = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(a.lo)), _mm_set1_ps(a.hi), 1);
  const __m256 second = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(b.lo)), _mm_set1_ps(b.hi), 1);
  return _mm512_insertf32x8(_mm512_castps256_ps512(first), second, 1);
}
inline __m256i act_codes(const ActBlock& a) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q)); }
#elif defined(FLASHSERVE_AVX2)
// Lane scales times the activations' d, each product rounded once, as in the scalar code.
template <class C>
inline __m256 lane_scales(const ChunkScales& s, float xd) {
  if constexpr (!C::kHalfScales) return _mm256_set1_ps(s.lo * xd);
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(s.lo * xd)), _mm_set1_ps(s.hi * xd), 1);
}
#endif

// y[t * n_out + r] for R weight rows from w and T tokens' activation blocks from a (nb chunks each).
template <class C, int R, int T>
void dot_tile(const char* w, size_t rb, const ActBlock* a, int64_t nb, float* y, int64_t n_out) {
  using Block = typename C::Block;
  auto block = [&](int r, int64_t b) -> const Block& {
    return reinterpret_cast<const Block*>(w + r * rb)[b / C::kChunks];
  };
  auto chunk = [](int64_t b) { return int(b % C::kChunks); };
  float off[T][R] = {};
#if defined(__AVX512BW__)
  __m512 acc[T][R];
  for (auto& per_tok : acc)
    for (__m512& v : per_tok) v = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 2) {
    const bool both = b + 1 < nb;
    const int64_t b1 = both ? b + 1 : b;  // a lone last chunk pairs with itself, its twin's scale 0
    __m512i wc[R];
    __m512 ws[R];
    ChunkScales sc[R][2];
    for (int r = 0; r < R; ++r) {
      wc[r] = pair(weight_codes<C>(block(r, b), chunk(b)), weight_codes<C>(block(r, b1), chunk(b1)));
      sc[r][0] = C::scales(block(r, b), chunk(b));
      sc[r][1] = both ? C::scales(block(r, b1), chunk(b1)) : ChunkScales{0.0f, 0.0f};
      ws[r] = pair<C>(sc[r][0], sc[r][1]);
    }
    for (int t = 0; t < T; ++t) {
      const ActBlock &a0 = a[t * nb + b], &a1 = a[t * nb + b1];
      const __m512i xq = pair(act_codes(a0), act_codes(a1));
      const __m512 xd = pair(a0.d, a1.d);
      for (int r = 0; r < R; ++r) {
        // ws * xd per lane is the scalar product of the two scales, rounded once, as in the contract.
        acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q8::code_lane_sums<C::kSigned>(wc[r], xq)), _mm512_mul_ps(ws[r], xd), acc[t][r]);
        off[t][r] = add_offset<C>(off[t][r], sc[r][0], a0);
        if (both) off[t][r] = add_offset<C>(off[t][r], sc[r][1], a1);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) {
      alignas(64) float l[16];
      _mm512_store_ps(l, acc[t][r]);
      float even[8], odd[8];
      std::copy(l, l + 8, even);
      std::copy(l + 8, l + 16, odd);
      y[t * n_out + r] = reduce_lanes(even, odd, off[t][r]);
    }
  }
#elif defined(FLASHSERVE_AVX2)
  __m256 acc[T][R][2];
  for (auto& per_tok : acc)
    for (auto& per_row : per_tok)
      for (__m256& v : per_row) v = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i wc[R];
    ChunkScales sc[R];
    for (int r = 0; r < R; ++r) {
      wc[r] = weight_codes<C>(block(r, b), chunk(b));
      sc[r] = C::scales(block(r, b), chunk(b));
    }
    for (int t = 0; t < T; ++t) {
      const ActBlock& ab = a[t * nb + b];
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.q));
      for (int r = 0; r < R; ++r) {
        __m256& lanes = acc[t][r][b % 2];
        lanes = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q8::code_lane_sums<C::kSigned>(wc[r], xq)), lane_scales<C>(sc[r], ab.d), lanes);
        off[t][r] = add_offset<C>(off[t][r], sc[r], ab);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) {
      float even[8], odd[8];
      _mm256_storeu_ps(even, acc[t][r][0]);
      _mm256_storeu_ps(odd, acc[t][r][1]);
      y[t * n_out + r] = reduce_lanes(even, odd, off[t][r]);
    }
  }
#else
  float acc[T][R][2][8] = {};
  for (int64_t b = 0; b < nb; ++b) {
    for (int r = 0; r < R; ++r) {
      const Block& blk = block(r, b);
      const ChunkScales sc = C::scales(blk, chunk(b));
      int codes[kBlock];
      for (int e = 0; e < kBlock; ++e) codes[e] = C::code(blk, chunk(b), e);
      for (int t = 0; t < T; ++t) {
        const ActBlock& ab = a[t * nb + b];
        for (int i = 0; i < 8; ++i) {
          int32_t lane = 0;
          for (int e = 4 * i; e < 4 * i + 4; ++e) lane += codes[e] * ab.q[e];
          acc[t][r][b % 2][i] = std::fma(float(lane), (i < 4 ? sc.lo : sc.hi) * ab.d, acc[t][r][b % 2][i]);
        }
        off[t][r] = add_offset<C>(off[t][r], sc, ab);
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) y[t * n_out + r] = reduce_lanes(acc[t][r][0], acc[t][r][1], off[t][r]);
#endif
}

// Tile shapes: rows that share a token's activation block, tokens that share a row's decoded codes.
#if defined(__AVX512F__)
constexpr int kRowsSingle = 4, kRowsBatch = 2, kTokens = 4;
#else
constexpr int kRowsSingle = 4, kRowsBatch = 2, kTokens = 2;
#endif

template <class C, int R>
void row_group(const char* w, size_t rb, const ActBlock* a, int64_t num_tokens, int64_t nb, float* y, int64_t n_out) {
  int64_t t = 0;
  for (; t + kTokens <= num_tokens; t += kTokens) dot_tile<C, R, kTokens>(w, rb, a + t * nb, nb, y + t * n_out, n_out);
  if constexpr (kTokens > 2) {
    if (t + 2 <= num_tokens) {
      dot_tile<C, R, 2>(w, rb, a + t * nb, nb, y + t * n_out, n_out);
      t += 2;
    }
  }
  if (t < num_tokens) dot_tile<C, R, 1>(w, rb, a + t * nb, nb, y + t * n_out, n_out);
}

template <class C, int R>
void matmul_rows(const ActBlock* a, int64_t num_tokens, int64_t nb, const char* w, size_t rb, int64_t n_out, float* y) {
  const int64_t groups = n_out / R;
  parallel_for(groups, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      if (g + tile::kPrefetchGroups < end) tile::prefetch_rows(w + (g + tile::kPrefetchGroups) * R * rb, R * rb);
      row_group<C, R>(w + g * R * rb, rb, a, num_tokens, nb, y + g * R, n_out);
    }
  });
  for (int64_t o = groups * R; o < n_out; ++o) row_group<C, 1>(w + o * rb, rb, a, num_tokens, nb, y + o, n_out);
}

template <class C>
void matmul_codes(const ActBlock* a, int64_t num_tokens, int64_t nb, const char* w, size_t rb, int64_t n_out, float* y) {
  if (num_tokens == 1) {
    matmul_rows<C, kRowsSingle>(a, num_tokens, nb, w, rb, n_out, y);
  } else {
    matmul_rows<C, kRowsBatch>(a, num_tokens, nb, w, rb, n_out, y);
  }
}

}  // namespace

namespace q8 {
namespace {

// Codes: NaN becomes 0; the rest rounds to nearest even within [-127, 127] (so that negating never
// wraps). The vector versions compute the same values: max ignores NaN as std::max does in the
// scalar code (a NaN first operand yields the second), every other step is exact or rounded once the
// same way.
void quantize_block(const float* x, ActBlock& out) {
#if defined(FLASHSERVE_AVX512)
  const __m512 v[2] = {_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)};
  const __m512 m = _mm512_max_ps(_mm512_abs_ps(v[1]), _mm512_max_ps(_mm512_abs_ps(v[0]), _mm512_setzero_ps()));
  const float amax = _mm512_reduce_max_ps(m);
#elif defined(FLASHSERVE_AVX2)
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v[4], m = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    m = _mm256_max_ps(_mm256_andnot_ps(sign, v[i]), m);
  }
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  const float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
#else
  float amax = 0.0f;
  for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
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
  out.s_lo = d * float(sum[0]);
  out.s_hi = d * float(sum[1]);
}

}  // namespace

const ActBlock* quantize_rows(const float* x, int64_t num_tokens, int64_t k) {
  const int64_t blocks = num_tokens * (k / kBlock);
  // Reused across calls: a step's matmuls all fit the largest one's activations.
  thread_local std::vector<ActBlock> act;
  act.resize(size_t(blocks));
  ActBlock* a = act.data();
  parallel_for(
      blocks,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) quantize_block(x + i * kBlock, a[i]);
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
  const ActBlock* a = q8::quantize_rows(x, num_tokens, k);
  const auto* wb = static_cast<const char*>(w);
  const size_t rb = row_bytes(wtype, k);
  switch (wtype) {
    case DType::Q8_0: return matmul_codes<Q8_0Codes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q4_0: return matmul_codes<Q4_0Codes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q4_1: return matmul_codes<Q4_1Codes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q5_0: return matmul_codes<Q5_0Codes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q5_1: return matmul_codes<Q5_1Codes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::IQ4_NL: return matmul_codes<IQ4_NLCodes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q2_K: return matmul_codes<Q2_KCodes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q3_K: return matmul_codes<Q3_KCodes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q4_K: return matmul_codes<Q4_KCodes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q5_K: return matmul_codes<Q5_KCodes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q6_K: return matmul_codes<Q6_KCodes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q8_K: return matmul_codes<Q8_KCodes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::IQ4_XS: return matmul_codes<IQ4_XSCodes>(a, num_tokens, nb, wb, rb, n_out, y);
    default: return;
  }
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
