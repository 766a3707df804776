// matmul_q8_packed (kernels/matmul.h): matmul_q8 over weights in pack_rows_for_q8's layout, sixteen
// rows at a time. Every chunk sum, its scale and its place in each dot's sequence of fmas are
// matmul_q8's (q8_dot.h), so the results are bit-identical; what the layout saves is work per
// block: each 32-bit lane of a code vector is one row (q8_packed_layout.h), so four activations of
// a token, broadcast, multiply four elements of eight or sixteen rows in one instruction and the
// sums come out in row order with nothing to add across lanes. The codes are unpacked once for
// every token of a tile, and a block of tokens' activations stays in cache while the groups of
// rows go by.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/q8_dot.h"
#include "kernels/cpu/q8_packed_layout.h"

namespace flashserve::kernels::FLASHSERVE_ISA {
namespace {

using q8::ActBlock;
using q8_packed::kRows;

// What a 32-element chunk adds besides codes times scale (matmul_q8's offsets): Q4_1 and Q5_1 their
// minimum times the activations' sum, Q4_0 -8 d times it (its codes 0..15 stand for -8..7); Q8_0,
// IQ4_NL and Q5_0 (whose codes' bias comes off exactly) nothing. (The super-scaled formats' minimums
// go by super-block: super_group_tile.)
enum class Offset { None, Min, MinusEightD };
template <class B>
constexpr bool kAffineK = std::is_same_v<B, BlockQ4_K> || std::is_same_v<B, BlockQ5_K>;
// IQ4_NL and IQ4_XS: nibbles indexing kIQ4Values, signed codes as Q8_0's.
template <class B>
constexpr bool kLookup = std::is_same_v<B, BlockIQ4_NL> || std::is_same_v<B, BlockIQ4_XS>;
template <class B>
constexpr bool kSignedCodes = std::is_same_v<B, BlockQ8_0> || kLookup<B>;
// Codes of five bits: nibbles and a vector of fifth bits.
template <class B>
constexpr bool kFifthBit = std::is_same_v<B, BlockQ5_0> || std::is_same_v<B, BlockQ5_1> || std::is_same_v<B, BlockQ5_K>;
// Codes of two bits in crumb vectors (Q3_K's with a vector of third bits).
template <class B>
constexpr bool kCrumbs = std::is_same_v<B, BlockQ2_K> || std::is_same_v<B, BlockQ3_K>;
// What the unsigned codes of Q6_K (six bits), Q5_0 (five) and Q3_K (three) stand for is the code
// less this.
template <class B>
constexpr int kCodeBias = std::is_same_v<B, BlockQ6_K>   ? 32
                          : std::is_same_v<B, BlockQ5_0> ? 16
                          : std::is_same_v<B, BlockQ3_K> ? 4
                                                         : 0;
template <class B>
constexpr Offset kOffset = std::is_same_v<B, BlockQ4_1> || std::is_same_v<B, BlockQ5_1> ? Offset::Min
                           : std::is_same_v<B, BlockQ4_0>                                          ? Offset::MinusEightD
                                                                                                   : Offset::None;
// The super-scaled formats (q8::super_scaled): a super-block's integer sums, then one fma.
template <class B>
constexpr bool kSuper = kAffineK<B> || kCrumbs<B> || std::is_same_v<B, BlockQ6_K> || std::is_same_v<B, BlockIQ4_XS>;
// Those that scale each 16-element half apart (Q2_K also has a minimum for each).
template <class B>
constexpr bool kHalfScales = kCrumbs<B> || std::is_same_v<B, BlockQ6_K>;
// Those with minimums (offsets by -dmin), and where their dmin lies.
template <class B>
constexpr bool kMinimums = kAffineK<B> || std::is_same_v<B, BlockQ2_K>;
template <class B>
constexpr size_t kDminAt = kAffineK<B> ? q8_packed::q4k::kDminAt : q8_packed::q2k::kDminAt;
namespace q2k = q8_packed::q2k;
namespace q3k = q8_packed::q3k;
namespace q4k = q8_packed::q4k;
namespace q6k = q8_packed::q6k;
namespace iq4xs = q8_packed::iq4xs;

// The group's packed block holding chunk b (of 32 elements), and b's chunk within that block.
template <class B>
const uint8_t* packed_block(const uint8_t* g, int64_t b) {
  return g + size_t(b / q8_packed::kChunksPerBlock<B>) * q8_packed::kPackedBlockBytes<B>;
}
template <class B>
int chunk_of(int64_t b) {
  return int(b % q8_packed::kChunksPerBlock<B>);
}

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
#if defined(__AVX512VNNI__) || defined(__AVXVNNI__)
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif

// The kernel below is written once for two register widths: eight rows of a group (either half of
// its vectors) in 256-bit registers, or all sixteen in 512-bit ones (with AVX-512 VNNI, whose
// 512-bit dot products run at the rate of the 256-bit ones: twice the work each).
struct Ymm {
  using I = __m256i;
  using F = __m256;
  static constexpr int kLanes = 8;
  static I load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static F halves(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  template <bool kSigned>
  static I ints(const uint8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return kSigned ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
  }
  static I each_byte(char c) { return _mm256_set1_epi8(c); }
  static I each_dword(int32_t v) { return _mm256_set1_epi32(v); }
  static F each_float(float v) { return _mm256_set1_ps(v); }
  static I table16(const void* t) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
  }
  static I and_(I a, I b) { return _mm256_and_si256(a, b); }
  static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  static I xor_(I a, I b) { return _mm256_xor_si256(a, b); }
  template <int n>
  static I shl16(I a) { return _mm256_slli_epi16(a, n); }
  template <int n>
  static I shr16(I a) { return _mm256_srli_epi16(a, n); }
  template <int n>
  static I shl32(I a) { return _mm256_slli_epi32(a, n); }
  template <int n>
  static I shr32(I a) { return _mm256_srli_epi32(a, n); }
  static I shuffle(I table, I idx) { return _mm256_shuffle_epi8(table, idx); }
  static I add_sums(I acc, I w, I x) { return q8::add_lane_sums(acc, w, x); }
  static I add32(I a, I b) { return _mm256_add_epi32(a, b); }
  static I mul32(I a, I b) { return _mm256_mullo_epi32(a, b); }
  static I madd16(I a, I b) { return _mm256_madd_epi16(a, b); }
  static F to_float(I a) { return _mm256_cvtepi32_ps(a); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F negate(F a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static F zero() { return _mm256_setzero_ps(); }
  static void store(float* y, F v, int rows) {
    alignas(32) float t[kLanes];
    _mm256_store_ps(t, v);
    std::copy(t, t + rows, y);
  }
};

#if defined(__AVX512VNNI__)
struct Zmm {
  using I = __m512i;
  using F = __m512;
  static constexpr int kLanes = 16;
  static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  static F halves(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  template <bool kSigned>
  static I ints(const uint8_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return kSigned ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
  }
  static I each_byte(char c) { return _mm512_set1_epi8(c); }
  static I each_dword(int32_t v) { return _mm512_set1_epi32(v); }
  static F each_float(float v) { return _mm512_set1_ps(v); }
  static I table16(const void* t) {
    return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t)));
  }
  static I and_(I a, I b) { return _mm512_and_si512(a, b); }
  static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  static I xor_(I a, I b) { return _mm512_xor_si512(a, b); }
  template <int n>
  static I shl16(I a) { return _mm512_slli_epi16(a, n); }
  template <int n>
  static I shr16(I a) { return _mm512_srli_epi16(a, n); }
  template <int n>
  static I shl32(I a) { return _mm512_slli_epi32(a, n); }
  template <int n>
  static I shr32(I a) { return _mm512_srli_epi32(a, n); }
  static I shuffle(I table, I idx) { return _mm512_shuffle_epi8(table, idx); }
  static I sub8(I a, I b) { return _mm512_sub_epi8(a, b); }
  static I add_sums(I acc, I w, I x) { return _mm512_dpbusd_epi32(acc, w, x); }
  static I add32(I a, I b) { return _mm512_add_epi32(a, b); }
  static I mul32(I a, I b) { return _mm512_mullo_epi32(a, b); }
  static I madd16(I a, I b) { return _mm512_madd_epi16(a, b); }
  static F to_float(I a) { return _mm512_cvtepi32_ps(a); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F negate(F a) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(int32_t(0x80000000u)))); }
  static F zero() { return _mm512_setzero_ps(); }
  static void store(float* y, F v, int rows) { _mm512_mask_storeu_ps(y, __mmask16((1u << rows) - 1), v); }
};
using Wide = Zmm;
#else
using Wide = Ymm;
#endif

// Quads v and v + 4 of a chunk's rows (elements 4 v .. 4 v + 3 and 16 + 4 v .. 16 + 4 v + 3, one
// row a lane), as dot takes them: unsigned codes, or signed ones (kSignedCodes) biased by 128
// under VNNI and as they are without it.
template <class V>
struct Quads {
  typename V::I lo, hi;
};

// A chunk of the rows one vector holds: where their codes are and, for the 32-element formats,
// their scales and offsets (Q4_1, Q5_1: minimums; Q4_0: -8 d). The super-scaled formats' integer
// scales are int_scales'.
template <class V>
struct Chunk {
  typename V::F d, off;
  const uint8_t* codes;  // nibble vectors, Q8_0's code vectors or crumb vectors
  const uint8_t* highs;  // fifth bits (Q5_0, Q5_1, Q5_K), Q6_K's high two bits, Q3_K's third bits
};

// Chunk b of the group's rows row0 .. row0 + V::kLanes - 1. Always inlined: called, it makes the
// tile spill every accumulator around the call once a chunk (GCC declined to inline Q5_K's, which
// cost a sixth of its time).
template <class B, class V>
[[gnu::always_inline]] inline Chunk<V> chunk_at(const uint8_t* g, int64_t b, int row0) {
  const uint8_t* p = packed_block<B>(g, b);
  const int c = chunk_of<B>(b);
  Chunk<V> k;
  k.d = k.off = V::zero();
  k.highs = nullptr;
  if constexpr (kAffineK<B>) {
    k.codes = p + q4k::kCodesAt + q4k::kChunkCodes * c;
    if constexpr (std::is_same_v<B, BlockQ5_K>) k.highs = p + q4k::kHighsAt + q4k::kChunkHighs * c + 4 * row0;
  } else if constexpr (std::is_same_v<B, BlockQ2_K>) {
    k.codes = p + q2k::kChunksAt + q8_packed::kChunkCrumbs * c;
  } else if constexpr (std::is_same_v<B, BlockQ3_K>) {
    k.codes = p + q3k::kChunksAt + q3k::kChunkBytes * c;
    k.highs = k.codes + q8_packed::kChunkCrumbs + 4 * row0;
  } else if constexpr (std::is_same_v<B, BlockQ6_K>) {
    k.codes = p + q6k::kChunksAt + q6k::kChunkBytes * c;
    k.highs = k.codes + q6k::kChunkLow + 4 * row0;
  } else if constexpr (std::is_same_v<B, BlockIQ4_XS>) {
    k.codes = p + iq4xs::kCodesAt + iq4xs::kChunkCodes * c;
  } else {
    k.d = V::halves(p + 2 * row0);
    if constexpr (kOffset<B> == Offset::Min) k.off = V::halves(p + q8_packed::kMinAt<B> + 2 * row0);
    if constexpr (kOffset<B> == Offset::MinusEightD) k.off = V::mul(k.d, V::each_float(-8.0f));
    k.codes = p + q8_packed::kCodesAt<B>;
    if constexpr (kFifthBit<B>) k.highs = p + q8_packed::kHighsAt<B> + 4 * row0;
  }
  k.codes += 4 * row0;
  return k;
}

// kBiased: signed codes biased by 128, for VNNI's unsigned-by-signed products (the tile path
// multiplies signed bytes by signed bytes and takes them as they are).
template <class B, class V, int Q, bool kBiased = kVnni>
[[gnu::always_inline]] inline Quads<V> quads(const Chunk<V>& k) {
  using q8_packed::kVector;
  const auto bias = V::each_byte(char(0x80));
  if constexpr (std::is_same_v<B, BlockQ8_0>) {
    Quads<V> q{V::load(k.codes + kVector * Q), V::load(k.codes + kVector * (Q + 4))};
    if constexpr (kBiased) q = {V::xor_(q.lo, bias), V::xor_(q.hi, bias)};
    return q;
  }
  if constexpr (kCrumbs<B>) {
    // Crumb Q of each byte (16-bit shifts: what crosses from the neighbouring byte is masked off).
    const auto crumb = V::each_byte(3);
    Quads<V> q{V::and_(V::template shr16<2 * Q>(V::load(k.codes)), crumb),
               V::and_(V::template shr16<2 * Q>(V::load(k.codes + kVector)), crumb)};
    if constexpr (std::is_same_v<B, BlockQ3_K>) {
      // Bit Q of each byte is its low half's third bit, bit 4 + Q its high half's; moved to bit 2.
      const auto h = V::load(k.highs), bit = V::each_byte(4);
      typename V::I lo;
      if constexpr (Q <= 2) lo = V::template shl16<2 - Q>(h);
      else lo = V::template shr16<1>(h);
      q.lo = V::or_(q.lo, V::and_(lo, bit));
      q.hi = V::or_(q.hi, V::and_(V::template shr16<2 + Q>(h), bit));
    }
    return q;
  }
  const auto nibble = V::each_byte(0x0f), z = V::load(k.codes + kVector * Q);
  Quads<V> q{V::and_(z, nibble), V::and_(V::template shr16<4>(z), nibble)};
  if constexpr (kLookup<B>) {
    auto table = V::table16(kIQ4Values);
    if constexpr (kBiased) table = V::xor_(table, bias);
    q = {V::shuffle(table, q.lo), V::shuffle(table, q.hi)};
  }
  if constexpr (kFifthBit<B>) {
    // Bit Q of each byte is its low nibble's fifth bit, bit 4 + Q its high one's (16-bit shifts:
    // what crosses from the neighbouring byte misses bit 4).
    const auto h = V::load(k.highs), bit = V::each_byte(0x10);
    q.lo = V::or_(q.lo, V::and_(V::template shl16<4 - Q>(h), bit));
    q.hi = V::or_(q.hi, V::and_(V::template shr16<Q>(h), bit));
  }
  if constexpr (std::is_same_v<B, BlockQ6_K>) {
    // Bits 4 (Q % 2) and up: the low nibble's two high bits, then the high one's; moved to bits 4-5.
    const auto h = V::load(k.highs + kVector * (Q / 2)), two = V::each_byte(0x30);
    const auto lo = Q % 2 == 0 ? V::template shl16<4>(h) : h;
    const auto hi = Q % 2 == 0 ? V::template shl16<2>(h) : V::template shr16<2>(h);
    q.lo = V::or_(q.lo, V::and_(lo, two));
    q.hi = V::or_(q.hi, V::and_(hi, two));
  }
  return q;
}

template <class F>
inline void each_quad(F f) {
  f(std::integral_constant<int, 0>{});
  f(std::integral_constant<int, 1>{});
  f(std::integral_constant<int, 2>{});
  f(std::integral_constant<int, 3>{});
}

// Quad v of a token's activation block in every lane.
template <class V>
inline typename V::I x_quad(const ActBlock& ab, int v) {
  int32_t q;
  std::memcpy(&q, ab.q + 4 * v, 4);
  return V::each_dword(q);
}

// acc + each lane's four codes of w times the four activations of x.
template <class B, class V>
inline typename V::I dot(typename V::I acc, typename V::I w, typename V::I x) {
  if constexpr (kSignedCodes<B> && !kVnni) return V::add_sums(acc, _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  else return V::add_sums(acc, w, x);
}
// The same for two quads; without VNNI, unsigned codes (at most 63) let the int16 sums of four
// products (at most 4 * 63 * 127) add before widening.
template <class B, class V>
inline typename V::I dot2(typename V::I acc, typename V::I wa, typename V::I xa, typename V::I wb, typename V::I xb) {
  if constexpr (kVnni || kSignedCodes<B>) {
    return dot<B, V>(dot<B, V>(acc, wa, xa), wb, xb);
  } else {
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(wa, xa), _mm256_maddubs_epi16(wb, xb));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
}

// Where a token's integer sums start, so that the codes' bias comes off: the formats whose codes
// are their values plus kCodeBias (Q6_K's halves summed apart), signed codes under VNNI their
// values plus 128.
template <class B, class V>
inline typename V::I sum_start(const ActBlock& ab, bool high_half) {
  if constexpr (kHalfScales<B>) return V::each_dword(-kCodeBias<B> * (high_half ? ab.sum_hi : ab.sum_lo));
  if constexpr (kCodeBias<B> != 0) return V::each_dword(-kCodeBias<B> * (ab.sum_lo + ab.sum_hi));
  if constexpr (kSignedCodes<B> && kVnni) return V::each_dword(-128 * (ab.sum_lo + ab.sum_hi));
  return V::each_dword(0);
}

// The sums of q of two chunks as the int16 pair of a 32-bit lane (each within +-32 * 127).
inline int32_t sum_pair(const ActBlock& even, const ActBlock& odd) {
  return int32_t(uint32_t(uint16_t(even.sum_lo + even.sum_hi)) | uint32_t(uint16_t(odd.sum_lo + odd.sum_hi)) << 16);
}
// The sums of q of a chunk's two halves likewise.
inline int32_t half_pair(const ActBlock& ab) {
  return int32_t(uint32_t(uint16_t(ab.sum_lo)) | uint32_t(uint16_t(ab.sum_hi)) << 16);
}

// Q4_K's and Q5_K's minimums of chunks 2 j and 2 j + 1 of the super-block at p, for the rows one
// vector holds, as the int16 pair of each lane: times sum_pair by madd, the exact sum of both
// chunks' minimum times sum of q.
template <class V>
[[gnu::always_inline]] inline typename V::I minimum_pair(const uint8_t* p, int j, int row0) {
  const auto even = V::template ints<false>(p + q4k::kMinsAt + kRows * 2 * j + row0);
  const auto odd = V::template ints<false>(p + q4k::kMinsAt + kRows * (2 * j + 1) + row0);
  return V::or_(even, V::template shl32<16>(odd));
}

// Q2_K's minimums of chunk c's two halves, for the rows one vector holds, as the int16 pair of each
// lane: times half_pair by madd, the exact sum of each half's minimum times its sum of q.
template <class V>
[[gnu::always_inline]] inline typename V::I half_minimums(const uint8_t* p, int c, int row0) {
  const auto lo = V::template shr32<4>(V::template ints<false>(p + q2k::kScalesAt + kRows * 2 * c + row0));
  const auto hi = V::template shr32<4>(V::template ints<false>(p + q2k::kScalesAt + kRows * (2 * c + 1) + row0));
  return V::or_(lo, V::template shl32<16>(hi));
}

// A single token's pass over the weights is bound by memory: asking for the bytes 1 KB past the
// chunk being read (about three chunks of Q5_K, three groups' worth of Q8_0 a thread's run ahead)
// made decode of the 1B-shaped files 10-25% faster than leaving the stream to the hardware
// prefetcher (Q5_K_M 20 -> 24-26 tokens/s, IQ4_XS 30 -> 34-36); 2 and 4 KB did less.
template <class B>
void prefetch_ahead(const uint8_t* g, int64_t b) {
  constexpr size_t kChunkBytes = q8_packed::kPackedBlockBytes<B> / q8_packed::kChunksPerBlock<B>;
  const auto* ahead = reinterpret_cast<const char*>(g + size_t(b) * kChunkBytes + 1024);
  for (size_t line = 0; line < kChunkBytes; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
  // Q5_K's fifth bits lie past its super-block's codes, where that lead reaches only by the fifth
  // chunk: the next super-block's are asked for as this one starts (decode 26 -> 27.6 tokens/s).
  if constexpr (std::is_same_v<B, BlockQ5_K>) {
    if (b % 8 == 0) {
      const auto* highs = reinterpret_cast<const char*>(packed_block<B>(g, b + 8) + q4k::kHighsAt);
      for (size_t line = 0; line < 8 * q4k::kChunkHighs; line += 64) _mm_prefetch(highs + line, _MM_HINT_T0);
    }
  }
}

// Chunk k's exact integer sums against each of T tokens' activation blocks x (kHalfScales: each
// half apart, the second in hi).
template <class B, class V, int T>
[[gnu::always_inline]] inline void chunk_sums(const Chunk<V>& k, const ActBlock* const (&x)[T], typename V::I (&lo)[T],
                                              typename V::I (&hi)[T]) {
  constexpr bool kHalves = kHalfScales<B>;
  for (int t = 0; t < T; ++t) {
    lo[t] = sum_start<B, V>(*x[t], false);
    if constexpr (kHalves) hi[t] = sum_start<B, V>(*x[t], true);
  }
  each_quad([&](auto v) {
    const Quads<V> q = quads<B, V, v>(k);
    for (int t = 0; t < T; ++t) {
      if constexpr (kHalves) {
        lo[t] = dot<B, V>(lo[t], q.lo, x_quad<V>(*x[t], v));
        hi[t] = dot<B, V>(hi[t], q.hi, x_quad<V>(*x[t], v + 4));
      } else {
        lo[t] = dot2<B, V>(lo[t], q.lo, x_quad<V>(*x[t], v), q.hi, x_quad<V>(*x[t], v + 4));
      }
    }
  });
}

// T tokens (t = 0 .. T-1 of a) against the group's rows row0 .. row0 + rows - 1 (one vector's),
// one fma per chunk.
template <class B, class V, int T>
void chunk_group_tile(const uint8_t* g, const ActBlock* a, int64_t nb, float* y, int64_t n_out, int row0, int rows) {
  using I = typename V::I;
  using F = typename V::F;
  F acc[T], off[T];
  for (int t = 0; t < T; ++t) acc[t] = off[t] = V::zero();
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (T == 1) prefetch_ahead<B>(g, b);
    const Chunk<V> k = chunk_at<B, V>(g, b, row0);
    const ActBlock* x[T];
    for (int t = 0; t < T; ++t) x[t] = &a[t * nb + b];
    I sums[T], unused[T];
    chunk_sums<B, V, T>(k, x, sums, unused);
    for (int t = 0; t < T; ++t) {
      acc[t] = V::fma(V::to_float(sums[t]), V::mul(k.d, V::each_float(x[t]->d)), acc[t]);
      if constexpr (kOffset<B> != Offset::None) off[t] = V::fma(k.off, V::each_float(x[t]->s), off[t]);
    }
  }
  for (int t = 0; t < T; ++t) V::store(y + t * n_out + row0, V::add(acc[t], off[t]), rows);
}

// A super-scaled chunk's integer scales for the rows one vector holds (kHalfScales: of each half).
template <class V>
struct IntScales {
  typename V::I lo, hi;
};
template <class B, class V>
[[gnu::always_inline]] inline IntScales<V> int_scales(const uint8_t* p, int c, int row0) {
  if constexpr (kAffineK<B>) {
    const auto sc = V::template ints<false>(p + q4k::kScalesAt + kRows * c + row0);
    return {sc, sc};
  } else if constexpr (std::is_same_v<B, BlockQ2_K>) {
    const auto low_nibble = V::each_dword(0x0f);
    return {V::and_(V::template ints<false>(p + q2k::kScalesAt + kRows * 2 * c + row0), low_nibble),
            V::and_(V::template ints<false>(p + q2k::kScalesAt + kRows * (2 * c + 1) + row0), low_nibble)};
  } else if constexpr (std::is_same_v<B, BlockQ3_K> || std::is_same_v<B, BlockQ6_K>) {
    const size_t at = std::is_same_v<B, BlockQ3_K> ? q3k::kScalesAt : q6k::kScalesAt;
    return {V::template ints<true>(p + at + kRows * 2 * c + row0), V::template ints<true>(p + at + kRows * (2 * c + 1) + row0)};
  } else {
    const auto sc = V::template ints<true>(p + iq4xs::kScalesAt + kRows * c + row0);
    return {sc, sc};
  }
}

// chunk_group_tile for the super-scaled formats: a super-block's chunk sums times their scales
// (and minimums times the chunks' or halves' sums of q) in int32, then one fma each.
template <class B, class V, int T>
void super_group_tile(const uint8_t* g, const ActBlock* a, int64_t nb, float* y, int64_t n_out, int row0, int rows) {
  constexpr bool kHalves = kHalfScales<B>;
  using I = typename V::I;
  using F = typename V::F;
  F acc[T], off[T];
  for (int t = 0; t < T; ++t) acc[t] = off[t] = V::zero();
  for (int64_t s = 0; s < nb; s += 8) {
    const uint8_t* p = packed_block<B>(g, s);
    I sums[T], mins[T];
    for (int t = 0; t < T; ++t) sums[t] = mins[t] = V::each_dword(0);
    for (int c = 0; c < 8; ++c) {
      if constexpr (T == 1) prefetch_ahead<B>(g, s + c);
      const Chunk<V> k = chunk_at<B, V>(g, s + c, row0);
      const IntScales<V> sc = int_scales<B, V>(p, c, row0);
      const ActBlock* x[T];
      for (int t = 0; t < T; ++t) x[t] = &a[t * nb + s + c];
      I lo[T], hi[T];
      chunk_sums<B, V, T>(k, x, lo, hi);
      for (int t = 0; t < T; ++t) {
        sums[t] = V::add32(sums[t], V::mul32(lo[t], sc.lo));
        if constexpr (kHalves) sums[t] = V::add32(sums[t], V::mul32(hi[t], sc.hi));
      }
    }
    if constexpr (kAffineK<B>) {
      for (int j = 0; j < 4; ++j) {
        const I m = minimum_pair<V>(p, j, row0);
        for (int t = 0; t < T; ++t) {
          const ActBlock* x = a + t * nb + s + 2 * j;
          mins[t] = V::add32(mins[t], V::madd16(m, V::each_dword(sum_pair(x[0], x[1]))));
        }
      }
    }
    if constexpr (std::is_same_v<B, BlockQ2_K>) {
      for (int c = 0; c < 8; ++c) {
        const I m = half_minimums<V>(p, c, row0);
        for (int t = 0; t < T; ++t) mins[t] = V::add32(mins[t], V::madd16(m, V::each_dword(half_pair(a[t * nb + s + c]))));
      }
    }
    const F d = V::halves(p + 2 * row0);
    for (int t = 0; t < T; ++t) {
      const F xd = V::each_float(a[t * nb + s].d);
      acc[t] = V::fma(V::to_float(sums[t]), V::mul(d, xd), acc[t]);
      if constexpr (kMinimums<B>) {
        const F neg_dmin = V::negate(V::halves(p + kDminAt<B> + 2 * row0));
        off[t] = V::fma(V::to_float(mins[t]), V::mul(neg_dmin, xd), off[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) V::store(y + t * n_out + row0, V::add(acc[t], off[t]), rows);
}

template <class B, class V, int T>
void group_tile(const uint8_t* g, const ActBlock* a, int64_t nb, float* y, int64_t n_out, int row0, int rows) {
  if constexpr (kSuper<B>) super_group_tile<B, V, T>(g, a, nb, y, n_out, row0, rows);
  else chunk_group_tile<B, V, T>(g, a, nb, y, n_out, row0, rows);
}

#if defined(__AMX_INT8__)
// AMX: one tile instruction multiplies a chunk of sixteen tokens' activations (a 16 x 32-byte
// tile) by the same chunk of sixteen rows (an 8 x 64-byte tile: row v holds elements 4 v .. 4 v + 3
// of each row, which is what a quad's code vector already is) into 16 x 16 exact int32 sums. Those
// are the vector path's integer sums, so the fmas that follow, the same as there, give the same
// bits. Tiles neither forward to vector loads nor from vector stores: a group's codes are unpacked
// (all its chunks, or for the super-scaled formats a super-block) before the first tile reads them,
// and the activations are copied once into tiles of their own (act_tiles).
//
// The super-scaled formats unpack each code times its chunk's (or half's) integer scale, an int16,
// as two byte planes (low byte unsigned, high byte signed); two products a pair of chunks (64
// bytes deep) then add a whole super-block's scaled sums in the tiles (low + 256 high), so what
// leaves the tile unit is 2 KB per super-block, not 1 KB per chunk, and the float work is one fma
// per super-block: the 1B-shaped Q6_K's 2048 x 2048 matmul of 512 tokens went from 6.1 to 3.2 ms.
// The 32-element formats' scales are f16 per chunk: their sums leave the tiles chunk by chunk.
namespace amx {

constexpr int kTokens = 16;
// Tokens whose tiles pass each group's unpacked codes (twice the vector path's block: their
// activation tiles, 1.4 MB at k = 8,192, still fit a core's L2).
constexpr int64_t kTokenBlock = 128;
// Tile registers: 0-3 sums, 4-5 activations, 6-7 codes.

// The products' depth: a chunk (32 bytes a token), or a pair of chunks (64: the tile unit's
// whole row, the same time per product as a chunk's).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
  explicit TileConfig(int depth) {
    for (int i = 0; i < 8; ++i) rows[i] = kTokens, bytes_per_row[i] = 64;
    for (int i : {4, 5}) bytes_per_row[i] = uint16_t(depth);
    for (int i : {6, 7}) rows[i] = uint8_t(depth / 4);
  }
};

// This thread's tile registers configured for products of `depth` bytes for the scope (and handed
// back, so that a context switch need not save their 8 KB).
class Tiles {
 public:
  explicit Tiles(int depth) {
    static const TileConfig chunk(32), pair(64);
    _tile_loadconfig(depth == 32 ? &chunk : &pair);
  }
  ~Tiles() { _tile_release(); }
  Tiles(const Tiles&) = delete;
  Tiles& operator=(const Tiles&) = delete;
};

// The signed formats' codes as their values (less kCodeBias): signed by signed bytes; the rest
// unsigned (their minimums are offsets).
template <class B>
constexpr bool kSignedTile = kSignedCodes<B> || kCodeBias<B> != 0;

struct alignas(64) CodeTile {
  uint8_t row[8][64];
};
// A pair of super-scaled chunks' codes times their scales: the low bytes and the high ones, each
// a tile of both chunks' rows.
struct alignas(64) ScaledCodeTile {
  uint8_t low[16][64], high[16][64];
};

// A pair of chunks of sixteen tokens' activations: the codes as a tile (a token's 64 bytes a row,
// either chunk's 32 a tile of rows 64 bytes apart), each token's d and s of both (ActBlock's),
// their sum_pair and each one's half_pair.
struct alignas(64) ActTile {
  int8_t q[kTokens][64];
  float d[2][kTokens], s[2][kTokens];
  int32_t sum_pair[kTokens];
  int32_t half_pair[2][kTokens];
};
inline int64_t pairs_of(int64_t nb) { return (nb + 1) / 2; }

inline int64_t tiles_of(int64_t num_tokens) { return (num_tokens + kTokens - 1) / kTokens; }

// The activations of a's tokens by sixteens, [tile][pair of chunks], in a buffer of the calling
// thread (an odd count's last chunk paired with zeros, and the last tile's missing tokens zeros).
inline const ActTile* act_tiles(const ActBlock* a, int64_t num_tokens, int64_t nb) {
  thread_local std::vector<ActTile> tiles;
  const int64_t pairs = pairs_of(nb);
  tiles.resize(size_t(tiles_of(num_tokens) * pairs));
  ActTile* out = tiles.data();  // (the workers' own thread_local would be another buffer)
  parallel_for(int64_t(tiles.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ActTile& tile = out[i];
      const int64_t b = 2 * (i % pairs);
      const int64_t first_token = i / pairs * kTokens;
      const ActBlock* first = a + first_token * nb + b;
      const int tokens = int(std::min<int64_t>(kTokens, num_tokens - first_token));
      if (tokens < kTokens) tile = ActTile{};
      for (int t = 0; t < tokens; ++t) {
        const ActBlock* ab = first + t * nb;
        const bool both = b + 1 < nb;
        std::memcpy(tile.q[t], ab[0].q, 32);
        std::memset(tile.q[t] + 32, 0, 32);
        if (both) std::memcpy(tile.q[t] + 32, ab[1].q, 32);
        for (int h = 0; h < 2; ++h) {
          tile.d[h][t] = h == 0 || both ? ab[h].d : 0.0f;
          tile.s[h][t] = h == 0 || both ? ab[h].s : 0.0f;
          tile.half_pair[h][t] = h == 0 || both ? half_pair(ab[h]) : 0;
        }
        tile.sum_pair[t] = both ? sum_pair(ab[0], ab[1]) : 0;
      }
    }
  });
  return tiles.data();
}

// The group's codes, chunk after chunk, as tiles (in a buffer of the calling thread).
template <class B>
const CodeTile* unpack_group(const uint8_t* g, int64_t nb) {
  thread_local std::vector<CodeTile> tiles;
  tiles.resize(size_t(nb));
  for (int64_t b = 0; b < nb; ++b) {
    const Chunk<Zmm> k = chunk_at<B, Zmm>(g, b, 0);
    each_quad([&](auto v) {
      Quads<Zmm> q = quads<B, Zmm, v, false>(k);
      if constexpr (kCodeBias<B> != 0) {
        const auto bias = Zmm::each_byte(char(kCodeBias<B>));
        q = {Zmm::sub8(q.lo, bias), Zmm::sub8(q.hi, bias)};
      }
      _mm512_store_si512(tiles[size_t(b)].row[v], q.lo);
      _mm512_store_si512(tiles[size_t(b)].row[v + 4], q.hi);
    });
  }
  return tiles.data();
}

// The unsigned form unpack_super_block multiplies: Q2_K's, Q4_K's and Q5_K's codes as they are,
// Q3_K's and Q6_K's raw bits (their values plus 4 and 32), IQ4_XS's values plus 128.
template <class B>
constexpr int kUnsignedBias = std::is_same_v<B, BlockIQ4_XS> ? 128 : kCodeBias<B>;

// A chunk's (or kHalfScales half's) sixteen row scales as unpack_super_block takes them: each in
// the four bytes of its row's lane, and bias times it in the row's two 16-bit lanes.
struct RowScales {
  __m512i bytes, bias;
};
template <class B>
RowScales row_scales(const uint8_t* p, int c, int h) {
  const uint8_t* at = kAffineK<B>                       ? p + q4k::kScalesAt + kRows * c
                      : std::is_same_v<B, BlockQ2_K> ? p + q2k::kScalesAt + kRows * (2 * c + h)
                      : std::is_same_v<B, BlockQ3_K> ? p + q3k::kScalesAt + kRows * (2 * c + h)
                      : std::is_same_v<B, BlockQ6_K> ? p + q6k::kScalesAt + kRows * (2 * c + h)
                                                      : p + iq4xs::kScalesAt + kRows * c;
  __m128i scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
  if constexpr (std::is_same_v<B, BlockQ2_K>) scales = _mm_and_si128(scales, _mm_set1_epi8(0x0f));  // less the minimums
  // Byte i of 128-bit lane l is row 4 l + i / 4's.
  const __m512i row_of_byte = _mm512_set_epi32(0x0f0f0f0f, 0x0e0e0e0e, 0x0d0d0d0d, 0x0c0c0c0c, 0x0b0b0b0b, 0x0a0a0a0a,
                                               0x09090909, 0x08080808, 0x07070707, 0x06060606, 0x05050505, 0x04040404,
                                               0x03030303, 0x02020202, 0x01010101, 0x00000000);
  const __m512i row_of_word = _mm512_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 6, 6,
                                               5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
  const __m512i words = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(scales));
  return {_mm512_shuffle_epi8(_mm512_broadcast_i32x4(scales), row_of_byte),
          _mm512_mullo_epi16(_mm512_permutexvar_epi16(row_of_word, words), _mm512_set1_epi16(kUnsignedBias<B>))};
}

// A code vector (sixteen rows' four codes, in kUnsignedBias's unsigned form) times each row's
// scale, as the low and high bytes of the int16 products into tile row v. Each byte multiplies
// alone (its pair's other byte masked to 0), so the 16-bit products stay in their bytes' places.
template <class B>
[[gnu::always_inline]] inline void scale_codes(__m512i codes, const RowScales& scales, ScaledCodeTile& out, int v) {
  const __m512i low_byte = _mm512_set1_epi16(0x00ff);
  __m512i even = _mm512_maddubs_epi16(_mm512_and_si512(codes, low_byte), scales.bytes);
  __m512i odd = _mm512_maddubs_epi16(_mm512_andnot_si512(low_byte, codes), scales.bytes);
  if constexpr (kUnsignedBias<B> != 0) {
    even = _mm512_sub_epi16(even, scales.bias);
    odd = _mm512_sub_epi16(odd, scales.bias);
  }
  _mm512_store_si512(out.low[v], _mm512_or_si512(_mm512_and_si512(even, low_byte), _mm512_slli_epi16(odd, 8)));
  _mm512_store_si512(out.high[v], _mm512_or_si512(_mm512_srli_epi16(even, 8), _mm512_andnot_si512(low_byte, odd)));
}

// Super-block s's codes (chunks s .. s + 7) times their scales, by pairs of chunks. The next
// group's same super-block is asked for meanwhile: at sixteen tokens a group's pass is as long as
// its read from memory, which otherwise waits for the pass before it.
template <class B>
void unpack_super_block(const uint8_t* g, int64_t s, const uint8_t* next_group, ScaledCodeTile (&out)[4]) {
  if (next_group != nullptr) {
    const auto* ahead = reinterpret_cast<const char*>(packed_block<B>(next_group, s));
    for (size_t line = 0; line < q8_packed::kPackedBlockBytes<B>; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
  }
  const uint8_t* p = packed_block<B>(g, s);
  for (int c = 0; c < 8; ++c) {
    const Chunk<Zmm> k = chunk_at<B, Zmm>(g, s + c, 0);
    const RowScales lo_scales = row_scales<B>(p, c, 0), hi_scales = row_scales<B>(p, c, 1);
    each_quad([&](auto v) {
      const Quads<Zmm> q = quads<B, Zmm, v, std::is_same_v<B, BlockIQ4_XS>>(k);
      scale_codes<B>(q.lo, lo_scales, out[c / 2], 8 * (c % 2) + v);
      scale_codes<B>(q.hi, hi_scales, out[c / 2], 8 * (c % 2) + v + 4);
    });
  }
}

// Product i (0-3) of a batch: chunk b + i (half h of its pair's tile x), into tile i from
// activations in tile 4 + i % 2 and codes in tile 6 + i % 2 (the intrinsics take tile numbers as
// literals).
#define FLASHSERVE_TILE_PRODUCT(c, a, w)               \
  _tile_loadd(a, x.q[0] + 32 * h, 64);                 \
  _tile_loadd(w, codes.row[0], 64);                    \
  _tile_zero(c);                                       \
  if constexpr (kSignedTile<B>) _tile_dpbssd(c, a, w); \
  else _tile_dpbsud(c, a, w);
template <class B, int i>
void multiply(const ActTile& x, int h, const CodeTile& codes) {
  if constexpr (i == 0) { FLASHSERVE_TILE_PRODUCT(0, 4, 6) }
  if constexpr (i == 1) { FLASHSERVE_TILE_PRODUCT(1, 5, 7) }
  if constexpr (i == 2) { FLASHSERVE_TILE_PRODUCT(2, 4, 6) }
  if constexpr (i == 3) { FLASHSERVE_TILE_PRODUCT(3, 5, 7) }
}
#undef FLASHSERVE_TILE_PRODUCT

// A batch: four chunks' products from chunk b on, their sums stored in chunk order. (Issuing the
// next batch's products before reading these back, so the tile unit works while the fmas run,
// measured no faster.)
constexpr int kProducts = 4;
using BatchSums = int32_t[kProducts][kTokens][16];

template <class B>
void multiply_batch(const ActTile* x, const CodeTile* codes, int64_t b, int64_t nb, BatchSums& sums) {
  const int64_t products = std::min<int64_t>(kProducts, nb - b);
  multiply<B, 0>(x[b / 2], int(b % 2), codes[b]);
  if (products > 1) multiply<B, 1>(x[(b + 1) / 2], int((b + 1) % 2), codes[b + 1]);
  if (products > 2) multiply<B, 2>(x[(b + 2) / 2], int((b + 2) % 2), codes[b + 2]);
  if (products > 3) multiply<B, 3>(x[(b + 3) / 2], int((b + 3) % 2), codes[b + 3]);
  _tile_stored(0, sums[0], 64);
  if (products > 1) _tile_stored(1, sums[1], 64);
  if (products > 2) _tile_stored(2, sums[2], 64);
  if (products > 3) _tile_stored(3, sums[3], 64);
}

// A tile of tokens (their nb chunks in x, by pairs; the first `tokens` stored) against all sixteen
// rows of group g (the first `rows` stored), whose codes are unpacked in `codes`: one fma per
// chunk, as chunk_group_tile.
template <class B>
void chunk_group_tile(const uint8_t* g, const CodeTile* codes, const ActTile* x, int64_t nb, float* y, int64_t n_out,
                      int tokens, int rows) {
  alignas(64) BatchSums sums;
  // Each chunk's offsets, for the second pass. (A type of this copy's own: a std::vector of a
  // plain vector type would be a weak symbol shared with the other copies.)
  struct alignas(64) ChunkOffsets {
    __m512 v;
  };
  thread_local std::vector<ChunkOffsets> offsets;
  if constexpr (kOffset<B> != Offset::None) offsets.resize(size_t(nb));
  __m512 acc[kTokens];
  for (int t = 0; t < kTokens; ++t) acc[t] = Zmm::zero();
  for (int64_t b0 = 0; b0 < nb; b0 += kProducts) {
    multiply_batch<B>(x, codes, b0, nb, sums);
    for (int c = 0; c < kProducts && b0 + c < nb; ++c) {
      const Chunk<Zmm> k = chunk_at<B, Zmm>(g, b0 + c, 0);
      if constexpr (kOffset<B> != Offset::None) offsets[size_t(b0 + c)].v = k.off;
      for (int t = 0; t < kTokens; ++t) {
        const __m512 xd = Zmm::each_float(x[(b0 + c) / 2].d[(b0 + c) % 2][t]);
        acc[t] = Zmm::fma(Zmm::to_float(_mm512_load_si512(sums[c][t])), Zmm::mul(k.d, xd), acc[t]);
      }
    }
  }
  // The offsets in a second pass, in the same order as chunk_group_tile's (which keeps them apart
  // too).
  __m512 off[kTokens];
  for (int t = 0; t < kTokens; ++t) off[t] = Zmm::zero();
  if constexpr (kOffset<B> != Offset::None) {
    for (int64_t b = 0; b < nb; ++b) {
      for (int t = 0; t < kTokens; ++t) off[t] = Zmm::fma(offsets[size_t(b)].v, Zmm::each_float(x[b / 2].s[b % 2][t]), off[t]);
    }
  }
  for (int t = 0; t < tokens; ++t) Zmm::store(y + t * n_out, Zmm::add(acc[t], off[t]), rows);
}

// Sixteens of tokens (`tiles` of them, tile i's pairs of chunks at x + i * pairs) against group g's
// super-scaled codes: per super-block, its codes unpacked times their scales (8 KB, which stay in
// L1 while every tile of tokens passes them), two products a pair of chunks into tiles 0 (low
// bytes) and 1 (high bytes), then the fma of super_group_tile; the minimums times the chunks' (Q4_K,
// Q5_K) or halves' (Q2_K) sums of q by pairs of int16 (vpdpwssd), exact as there.
template <class B>
void super_group_tiles(const uint8_t* g, const uint8_t* next_group, const ActTile* x, int64_t pairs, int64_t nb,
                       int tokens, float* y, int64_t n_out, int rows) {
  const int tiles = int(tiles_of(tokens));
  constexpr int kMaxTiles = int(kTokenBlock / kTokens);
  alignas(64) int32_t low[kTokens][16], high[kTokens][16];
  alignas(64) float acc[kMaxTiles][kTokens][16], off[kMaxTiles][kTokens][16];
  alignas(64) ScaledCodeTile codes[4];
  std::fill_n(&acc[0][0][0], tiles * kTokens * 16, 0.0f);
  std::fill_n(&off[0][0][0], tiles * kTokens * 16, 0.0f);
  for (int64_t s = 0; s < nb; s += 8) {
    unpack_super_block<B>(g, s, next_group, codes);
    const uint8_t* p = packed_block<B>(g, s);
    const __m512 d = Zmm::halves(p), neg_dmin = Zmm::negate(Zmm::halves(p + kDminAt<B>));
    __m512i mins[8];
    if constexpr (kAffineK<B>) {
      for (int j = 0; j < 4; ++j) mins[j] = minimum_pair<Zmm>(p, j, 0);
    }
    if constexpr (std::is_same_v<B, BlockQ2_K>) {
      for (int c = 0; c < 8; ++c) mins[c] = half_minimums<Zmm>(p, c, 0);
    }
    for (int i = 0; i < tiles; ++i) {
      const ActTile* xs = x + i * pairs + s / 2;
      _tile_zero(0);
      _tile_zero(1);
      for (int64_t pair = 0; pair < 4; ++pair) {
        _tile_loadd(4, xs[pair].q[0], 64);
        _tile_loadd(6, codes[pair].low[0], 64);
        _tile_loadd(7, codes[pair].high[0], 64);
        _tile_dpbsud(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
      }
      _tile_stored(0, low, 64);
      _tile_stored(1, high, 64);
      for (int t = 0; t < kTokens; ++t) {
        const __m512i sums = _mm512_add_epi32(_mm512_load_si512(low[t]), _mm512_slli_epi32(_mm512_load_si512(high[t]), 8));
        const __m512 xd = Zmm::each_float(xs[0].d[0][t]);
        _mm512_store_ps(acc[i][t], Zmm::fma(Zmm::to_float(sums), Zmm::mul(d, xd), _mm512_load_ps(acc[i][t])));
        if constexpr (kMinimums<B>) {
          __m512i m = _mm512_setzero_si512();
          if constexpr (kAffineK<B>) {
            for (int j = 0; j < 4; ++j) m = _mm512_dpwssd_epi32(m, mins[j], _mm512_set1_epi32(xs[j].sum_pair[t]));
          } else {
            for (int c = 0; c < 8; ++c) {
              m = _mm512_dpwssd_epi32(m, mins[c], _mm512_set1_epi32(xs[c / 2].half_pair[c % 2][t]));
            }
          }
          _mm512_store_ps(off[i][t], Zmm::fma(Zmm::to_float(m), Zmm::mul(neg_dmin, xd), _mm512_load_ps(off[i][t])));
        }
      }
    }
  }
  for (int i = 0; i < tiles; ++i) {
    for (int t = 0; t < std::min(kTokens, tokens - i * kTokens); ++t) {
      Zmm::store(y + (i * kTokens + t) * n_out, Zmm::add(_mm512_load_ps(acc[i][t]), _mm512_load_ps(off[i][t])), rows);
    }
  }
}

// Tokens [0, num_tokens) (their tiles in x) against groups [begin, end), a group's codes unpacked
// once for a block of them (kTokenBlock).
template <class B>
void matmul_tiles(const ActTile* x, int64_t num_tokens, int64_t nb, const uint8_t* w, size_t group_bytes,
                  int64_t n_out, float* y, int64_t begin, int64_t end) {
  const Tiles config(kSuper<B> ? 64 : 32);
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokenBlock) {
    const int64_t block_end = std::min(t0 + kTokenBlock, num_tokens);
    for (int64_t g = begin; g < end; ++g) {
      const int rows = int(std::min<int64_t>(kRows, n_out - g * kRows));
      const uint8_t* group = w + g * group_bytes;
      if constexpr (kSuper<B>) {
        super_group_tiles<B>(group, g + 1 < end ? group + group_bytes : nullptr, x + t0 / kTokens * pairs_of(nb),
                             pairs_of(nb), nb, int(block_end - t0), y + t0 * n_out + g * kRows, n_out, rows);
      } else {
        const CodeTile* codes = unpack_group<B>(group, nb);
        for (int64_t t = t0; t < block_end; t += kTokens) {
          chunk_group_tile<B>(group, codes, x + t / kTokens * pairs_of(nb), nb, y + t * n_out + g * kRows, n_out,
                              int(std::min<int64_t>(kTokens, block_end - t)), rows);
        }
      }
    }
  }
}

// The fewest tokens the tiles take. Their last tile is padded with zeros: 2048 x 2048 Q4_K at 24
// tokens took 210 us so, where a tile of sixteen (151) and eight tokens by vectors (103) take 254. But a tile's unpacking is the
// same work for one token as for sixteen, and below about twelve the vectors are faster (at 8:
// Q4_K 103 us by vectors, 123 by a tile; at 12: 161 and 132).
constexpr int64_t kMinTokens = 12;

}  // namespace amx
#endif

// Tokens per tile: as many as the vector registers hold accumulators for (sixteen with AVX2,
// thirty-two with AVX-512).
#if defined(FLASHSERVE_AVX512)
constexpr int kTokens = 8;
#else
constexpr int kTokens = 4;
#endif
template <class B, class V>
void vector_rows(const uint8_t* g, const ActBlock* a, int64_t num_tokens, int64_t nb, float* y, int64_t n_out,
                 int row0, int rows) {
  int64_t t = 0;
  for (; t + kTokens <= num_tokens; t += kTokens) {
    group_tile<B, V, kTokens>(g, a + t * nb, nb, y + t * n_out, n_out, row0, rows);
  }
  if constexpr (kTokens > 4) {
    if (t + 4 <= num_tokens) group_tile<B, V, 4>(g, a + t * nb, nb, y + t * n_out, n_out, row0, rows), t += 4;
  }
  if (t + 2 <= num_tokens) group_tile<B, V, 2>(g, a + t * nb, nb, y + t * n_out, n_out, row0, rows), t += 2;
  if (t < num_tokens) group_tile<B, V, 1>(g, a + t * nb, nb, y + t * n_out, n_out, row0, rows);
}

template <class B>
void group_rows(const uint8_t* g, const ActBlock* a, int64_t num_tokens, int64_t nb, float* y, int64_t n_out,
                int rows) {
  for (int row0 = 0; row0 < rows; row0 += Wide::kLanes) {
    vector_rows<B, Wide>(g, a, num_tokens, nb, y, n_out, row0, std::min(Wide::kLanes, rows - row0));
  }
}
#else
inline float u16_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return q8::half(h);
}

// Row r's code for element e of a chunk whose codes (and fifth bits, Q6_K's high bits or Q3_K's
// third bits) are there: the value it stands for, less Q4_0's 8 and the minimums of Q4_1, Q5_1 and
// the K-quants.
template <class B>
int code_at(const uint8_t* codes, const uint8_t* highs, int r, int e) {
  if constexpr (std::is_same_v<B, BlockQ8_0>) return int8_t(codes[q8_packed::code_byte(r, e)]);
  if constexpr (kCrumbs<B>) {
    int code = (codes[q8_packed::crumb_byte(r, e)] >> q8_packed::crumb_shift(e)) & 3;
    if constexpr (std::is_same_v<B, BlockQ3_K>) code |= ((highs[q8_packed::fifth_bit_byte(r, e)] >> q4k::high_bit(e)) & 1) << 2;
    return code - kCodeBias<B>;
  }
  const uint8_t byte = codes[q8_packed::nibble_byte(r, e)];
  int code = e < 16 ? byte & 0x0f : byte >> 4;
  if constexpr (kFifthBit<B>) code |= ((highs[q8_packed::fifth_bit_byte(r, e)] >> q4k::high_bit(e)) & 1) << 4;
  if constexpr (std::is_same_v<B, BlockQ6_K>) code |= ((highs[q6k::high_byte(r, e)] >> q6k::high_shift(e)) & 3) << 4;
  code -= kCodeBias<B>;
  if constexpr (kLookup<B>) code = kIQ4Values[code];
  return code;
}

// Super-block s of row r against a token's activation blocks a (all nb of them), as
// super_group_tile adds it.
template <class B>
void super_dot_scalar(const uint8_t* g, int64_t s, int r, const ActBlock* a, float& acc, float& off) {
  const uint8_t* p = packed_block<B>(g, s);
  int32_t sums = 0, mins = 0;
  for (int c = 0; c < 8; ++c) {
    const ActBlock& ab = a[s + c];
    const uint8_t* codes;
    const uint8_t* highs = nullptr;
    int scale[2], minimum[2] = {0, 0};
    if constexpr (kAffineK<B>) {
      scale[0] = scale[1] = p[q4k::kScalesAt + kRows * c + r];
      minimum[0] = minimum[1] = p[q4k::kMinsAt + kRows * c + r];
      codes = p + q4k::kCodesAt + q4k::kChunkCodes * c;
      if constexpr (std::is_same_v<B, BlockQ5_K>) highs = p + q4k::kHighsAt + q4k::kChunkHighs * c;
    } else if constexpr (std::is_same_v<B, BlockQ2_K>) {
      for (int h = 0; h < 2; ++h) {
        const uint8_t sm = p[q2k::kScalesAt + kRows * (2 * c + h) + r];
        scale[h] = sm & 0x0f, minimum[h] = sm >> 4;
      }
      codes = p + q2k::kChunksAt + q8_packed::kChunkCrumbs * c;
    } else if constexpr (std::is_same_v<B, BlockQ3_K>) {
      for (int h = 0; h < 2; ++h) scale[h] = int8_t(p[q3k::kScalesAt + kRows * (2 * c + h) + r]);
      codes = p + q3k::kChunksAt + q3k::kChunkBytes * c;
      highs = codes + q8_packed::kChunkCrumbs;
    } else if constexpr (std::is_same_v<B, BlockQ6_K>) {
      for (int h = 0; h < 2; ++h) scale[h] = int8_t(p[q6k::kScalesAt + kRows * (2 * c + h) + r]);
      codes = p + q6k::kChunksAt + q6k::kChunkBytes * c;
      highs = codes + q6k::kChunkLow;
    } else {
      scale[0] = scale[1] = int8_t(p[iq4xs::kScalesAt + kRows * c + r]);
      codes = p + iq4xs::kCodesAt + iq4xs::kChunkCodes * c;
    }
    int32_t half_sums[2] = {0, 0};
    for (int e = 0; e < q8::kBlock; ++e) half_sums[e / 16] += code_at<B>(codes, highs, r, e) * ab.q[e];
    sums += half_sums[0] * scale[0] + half_sums[1] * scale[1];
    mins += minimum[0] * ab.sum_lo + minimum[1] * ab.sum_hi;
  }
  const float xd = a[s].d;
  acc = std::fma(float(sums), u16_half(p + 2 * r) * xd, acc);
  if constexpr (kMinimums<B>) off = std::fma(float(mins), -u16_half(p + kDminAt<B> + 2 * r) * xd, off);
}

// Chunk b of row r against one activation block, into the row's sums as matmul_q8's scalar code adds.
template <class B>
void chunk_dot_scalar(const uint8_t* g, int64_t b, int r, const ActBlock& ab, float& acc, float& off) {
  const uint8_t* p = packed_block<B>(g, b);
  float d = u16_half(p + 2 * r), min = 0.0f;
  if constexpr (kOffset<B> == Offset::Min) min = u16_half(p + q8_packed::kMinAt<B> + 2 * r);
  const uint8_t* codes = p + q8_packed::kCodesAt<B>;
  const uint8_t* highs = kFifthBit<B> ? p + q8_packed::kHighsAt<B> : nullptr;
  int32_t sum = 0;
  for (int e = 0; e < q8::kBlock; ++e) sum += code_at<B>(codes, highs, r, e) * ab.q[e];
  acc = std::fma(float(sum), d * ab.d, acc);
  if constexpr (kOffset<B> == Offset::Min) off = std::fma(min, ab.s, off);
  if constexpr (kOffset<B> == Offset::MinusEightD) off = std::fma(-8.0f * d, ab.s, off);
}

template <class B>
void group_rows(const uint8_t* g, const ActBlock* a, int64_t num_tokens, int64_t nb, float* y, int64_t n_out,
                int rows) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    float acc[kRows] = {}, off[kRows] = {};
    if constexpr (kSuper<B>) {
      for (int64_t s = 0; s < nb; s += 8) {
        for (int r = 0; r < rows; ++r) super_dot_scalar<B>(g, s, r, a + t * nb, acc[r], off[r]);
      }
    } else {
      for (int64_t b = 0; b < nb; ++b) {
        for (int r = 0; r < rows; ++r) chunk_dot_scalar<B>(g, b, r, a[t * nb + b], acc[r], off[r]);
      }
    }
    for (int r = 0; r < rows; ++r) y[t * n_out + r] = acc[r] + off[r];
  }
}
#endif

// Threads take contiguous runs of groups: each reads its weights front to back (a single token
// asks for them 1 KB ahead: prefetch_ahead). Tokens go by blocks whose activations stay in a core's L2 (64 tokens of k = 8,192 take
// 850 KB) while every group of the run passes them.
constexpr int64_t kTokenBlock = 64;
template <class B>
void matmul_groups(const ActBlock* a, int64_t num_tokens, int64_t nb, const uint8_t* w, int64_t n_out, float* y) {
  const int64_t groups = (n_out + kRows - 1) / kRows;
  const size_t group_bytes = size_t(nb / q8_packed::kChunksPerBlock<B>) * q8_packed::kPackedBlockBytes<B>;
#if defined(__AMX_INT8__)
  // Enough tokens go by tiles, all of them, a group's codes unpacked once for a block of them.
  const bool by_tiles = num_tokens >= amx::kMinTokens;
  const amx::ActTile* x = by_tiles ? amx::act_tiles(a, num_tokens, nb) : nullptr;
#endif
  parallel_for(groups, [&](int64_t begin, int64_t end) {
#if defined(__AMX_INT8__)
    if (by_tiles) return amx::matmul_tiles<B>(x, num_tokens, nb, w, group_bytes, n_out, y, begin, end);
#endif
    for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokenBlock) {
      const int64_t tokens = std::min(kTokenBlock, num_tokens - t0);
      for (int64_t g = begin; g < end; ++g) {
        const int rows = int(std::min<int64_t>(kRows, n_out - g * kRows));
        group_rows<B>(w + g * group_bytes, a + t0 * nb, tokens, nb, y + t0 * n_out + g * kRows, n_out, rows);
      }
    }
  });
}

}  // namespace

void matmul_q8_packed(const float* x, int64_t num_tokens, int64_t k, const void* packed, DType wtype, int64_t n_out,
                      float* y) {
  if (!q8_packs(wtype)) throw_invalid_argument("matmul_q8_packed: %s is never packed", dtype_name(wtype).data());
  if (k % block_elems(wtype) != 0) throw_invalid_argument("matmul_q8_packed: k=%lld is not whole blocks", (long long)k);
  if (num_tokens <= 0 || n_out <= 0) return;
  const int64_t nb = k / 32;
  const ActBlock* a = q8::quantize_rows(x, num_tokens, k, q8::super_scaled(wtype) ? kSuperBlock : q8::kBlock);
  const auto* w = static_cast<const uint8_t*>(packed);
  switch (wtype) {
    case DType::Q4_0: return matmul_groups<BlockQ4_0>(a, num_tokens, nb, w, n_out, y);
    case DType::Q4_1: return matmul_groups<BlockQ4_1>(a, num_tokens, nb, w, n_out, y);
    case DType::Q5_0: return matmul_groups<BlockQ5_0>(a, num_tokens, nb, w, n_out, y);
    case DType::Q5_1: return matmul_groups<BlockQ5_1>(a, num_tokens, nb, w, n_out, y);
    case DType::Q8_0: return matmul_groups<BlockQ8_0>(a, num_tokens, nb, w, n_out, y);
    case DType::IQ4_NL: return matmul_groups<BlockIQ4_NL>(a, num_tokens, nb, w, n_out, y);
    case DType::IQ4_XS: return matmul_groups<BlockIQ4_XS>(a, num_tokens, nb, w, n_out, y);
    case DType::Q2_K: return matmul_groups<BlockQ2_K>(a, num_tokens, nb, w, n_out, y);
    case DType::Q3_K: return matmul_groups<BlockQ3_K>(a, num_tokens, nb, w, n_out, y);
    case DType::Q4_K: return matmul_groups<BlockQ4_K>(a, num_tokens, nb, w, n_out, y);
    case DType::Q5_K: return matmul_groups<BlockQ5_K>(a, num_tokens, nb, w, n_out, y);
    case DType::Q6_K: return matmul_groups<BlockQ6_K>(a, num_tokens, nb, w, n_out, y);
    default: return;
  }
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
