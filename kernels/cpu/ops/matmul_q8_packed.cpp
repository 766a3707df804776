// matmul_q8_packed (kernels/matmul.h): matmul_q8 over weights in pack_rows_for_q8's layout, sixteen
// rows at a time. Every chunk sum, its scale and its place in each dot's sequence of fmas are
// matmul_q8's (q8_dot.h), so the results are bit-identical; what the layout saves is work per
// block: each 32-bit lane of a code vector is one row (q8_packed_layout.h), so four activations of
// a token, broadcast, multiply four elements of eight or sixteen rows in one instruction and the
// sums come out in row order with nothing to add across lanes. The codes are unpacked once for
// every token of a tile, and a block of tokens' activations stays in cache while the groups of
// rows go by.
#include <algorithm>
#include <cstddef>
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

// Where the sixteen rows' integer scales of a super-scaled chunk c (of its half h, for kHalfScales)
// lie in super-block p: bytes, one a row (Q2_K's with the minimum in the high nibble).
template <class B>
const uint8_t* scales_at(const uint8_t* p, int c, int h) {
  if constexpr (kAffineK<B>) return p + q4k::kScalesAt + kRows * c;
  if constexpr (std::is_same_v<B, BlockQ2_K>) return p + q2k::kScalesAt + kRows * (2 * c + h);
  if constexpr (std::is_same_v<B, BlockQ3_K>) return p + q3k::kScalesAt + kRows * (2 * c + h);
  if constexpr (std::is_same_v<B, BlockQ6_K>) return p + q6k::kScalesAt + kRows * (2 * c + h);
  return p + iq4xs::kScalesAt + kRows * c;
}

// The group's packed block holding chunk b (of 32 elements), and b's chunk within that block.
template <class B>
const uint8_t* packed_block(const uint8_t* g, int64_t b) {
  return g + size_t(b / q8_packed::kChunksPerBlock<B>) * q8_packed::kPackedBlockBytes<B>;
}
template <class B>
int chunk_of(int64_t b) {
  return int(b % q8_packed::kChunksPerBlock<B>);
}

// Tokens whose activation blocks go in runs (Acts): a tile's worth with AVX-512 VNNI, none elsewhere.
#if defined(__AVX512VNNI__)
constexpr int kRunTokens = 8;
#else
constexpr int kRunTokens = 1;
#endif

// A block of tokens' activations (q8::quantize_rows) and what Q4_K's and Q5_K's tiles read besides:
// the sums of q of chunks 2 j and 2 j + 1 as the int16 pair of one int32 (sum_pair; at the index of
// chunk 2 j's block), made once a matmul (chunk_pair_sums) rather than once a group and tile: there
// each pair took about eight scalar instructions and a broadcast from a general register, a fifth
// of Q4_K's tile time on the avx512-vnni copy. One thread of a 2-core Xeon (AVX-512 VNNI, no AMX),
// BM_MatmulPacked n_out 2048, best of 6 alternating: avx512-vnni 8 tokens Q4_K 1.06-1.09x, Q5_K
// 1.10-1.11x, 64 tokens 1.05-1.09x; avx2 0.97-1.05x; one token even.
struct TokenBlock {
  const ActBlock* a;
  const int32_t* pairs;
  TokenBlock from(int64_t block) const { return {a + block, pairs ? pairs + block : nullptr}; }
};

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
#if defined(__AVX512VNNI__) || defined(__AVXVNNI__)
constexpr bool kVnni = true;
#else
constexpr bool kVnni = false;
#endif

#include "kernels/cpu/ops/matmul_q8_packed_vectors.inc"

// The sums of q of two chunks as the int16 pair of one int32 (each within +-32 * 127).
inline int32_t sum_pair(const ActBlock& even, const ActBlock& odd) {
  return int32_t(uint32_t(uint16_t(even.sum_lo + even.sum_hi)) | uint32_t(uint16_t(odd.sum_lo + odd.sum_hi)) << 16);
}

// TokenBlock's pairs for num_tokens tokens' blocks a, nb of them a token, in runs of run tokens
// (q8::quantize_rows).
inline const int32_t* chunk_pair_sums(const ActBlock* a, int64_t num_tokens, int64_t nb, int64_t run) {
  struct Pair {  // a type of this copy's own, as vector_rows' UnpackedChunk
    int32_t v;
  };
  thread_local std::vector<Pair> pairs;
  pairs.resize(size_t(num_tokens * nb));
  int32_t* out = &pairs.data()->v;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t first = t / run * run, n = std::min(run, num_tokens - first);
    const int64_t at = first * nb + (t - first);  // token t's block b: at + b * n
    for (int64_t b = 0; b + 1 < nb; b += 2) out[at + b * n] = sum_pair(a[at + b * n], a[at + (b + 1) * n]);
  }
  return out;
}

// A tile's activations: token t's block b. Each token's blocks follow each other (step nb), or the
// tokens go in runs of kRunTokens, a run's blocks chunk by chunk (step the run's length,
// q8::quantize_rows' run): a tile of eight tokens then finds a chunk's eight blocks at constant
// offsets from one pointer. With a pointer a token, GCC spilled them around every chunk of the
// avx512-vnni copy's tiles (Q4_K's tile: 89 movq, 40 after). One thread of a 2-core Xeon (AVX-512
// VNNI, no AMX), BM_MatmulPacked n_out 2048 k 2048, 64 tokens, best of 9 alternating: Q4_K 1916 ->
// 1765 us, Q5_K 1970 -> 1943, Q6_K 2402 -> 2353, IQ4_XS 1748 -> 1642 (Q8_0 at k 576 within noise).
// pairs: Q4_K's and Q5_K's sums of q of chunks b and b + 1 (TokenBlock), at the index of b's block.
struct Acts {
  const ActBlock* a;
  int64_t step;
  const int32_t* pairs;
  int64_t index(int t, int64_t b) const { return kRunTokens > 1 ? b * step + t : t * step + b; }
  const ActBlock& at(int t, int64_t b) const { return a[index(t, b)]; }
  int32_t pair(int t, int64_t b) const { return pairs[index(t, b)]; }
};


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
    k.codes = p + q4k::codes_at<B>(c);
    if constexpr (kFifthBit<B>) k.highs = p + q4k::highs_at(c) + 4 * row0;
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
  if constexpr (kSignedCodes<B> && !kVnni) return V::add_sums(acc, V::sign(w, w), V::sign(x, w));
  else return V::add_sums(acc, w, x);
}
// Without VNNI, for the unsigned codes scaled by whole chunks (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K):
// the products of two quads (four maddubs results, each a pair of products of a code of at most 5
// bits and an activation of at most 127: 4 * 2 * 31 * 127 <= 32767) add up in int16 before one
// madd widens them. Against one madd a quad, llvm-mca (znver3) counts the four-token tiles' chunk
// 2-5% fewer cycles (Q5_0 46.6 -> 45.1, Q4_K 35.6 -> 34.0); all four quads of the 4-bit codes in
// int16 (8 * 2 * 15 * 127 also fits) spilled registers and counted 13-20% more.
constexpr int kQuadsInInt16 = 2;

// The sums of q of a chunk's two halves as the int16 pair of a 32-bit lane (each within
// +-16 * 127): how ActBlock holds them.
inline int32_t half_pair(const ActBlock& ab) {
  static_assert(offsetof(ActBlock, sum_hi) == offsetof(ActBlock, sum_lo) + 2);
  int32_t pair;
  std::memcpy(&pair, &ab.sum_lo, 4);
  return pair;
}

// Where a token's integer sums start, so that the codes' bias comes off: the formats whose codes
// are their values plus kCodeBias (Q6_K's halves summed apart), signed codes under VNNI their
// values plus 128. (-bias, -bias) times half_pair by one madd: no scalar arithmetic a token.
template <class B, class V>
inline typename V::I sum_start(const ActBlock& ab, bool high_half) {
  if constexpr (kHalfScales<B>) return V::each_dword(-kCodeBias<B> * (high_half ? ab.sum_hi : ab.sum_lo));
  constexpr int kBias = kCodeBias<B> != 0 ? kCodeBias<B> : kSignedCodes<B> && kVnni ? 128 : 0;
  if constexpr (kBias == 0) return V::each_dword(0);
  const int32_t minus_bias = int32_t(uint32_t(uint16_t(-kBias)) * 0x10001u);
  return V::madd16(V::each_dword(half_pair(ab)), V::each_dword(minus_bias));
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
  const auto lo = V::template shr32<4>(V::template ints<false>(scales_at<BlockQ2_K>(p, c, 0) + row0));
  const auto hi = V::template shr32<4>(V::template ints<false>(scales_at<BlockQ2_K>(p, c, 1) + row0));
  return V::or_(lo, V::template shl32<16>(hi));
}

// A decode step's pass over the weights is bound by memory: asking for the bytes 1 KB past the
// chunk being read (about three chunks of Q5_K, three groups' worth of Q8_0 a thread's run ahead)
// made decode of the 1B-shaped files 10-25% faster than leaving the stream to the hardware
// prefetcher (Q5_K_M 20 -> 24-26 tokens/s, IQ4_XS 30 -> 34-36); 2 and 4 KB did less. The first
// tile of a group asks, whatever its tokens: a step of a few streams reads the weights once too
// (bench_forward BM_Decode, 3B-shaped Q8_0, 2-core AVX-512 Xeon: 8 streams 204-207 -> 174-181 ms
// on the avx512-amx copy; 4 streams on the avx2 copy 243-245 -> 209-213, though 4 streams on
// avx512-amx went 174-176 -> 180-189). The unpacked codes' pass (unpack_codes) does not ask: there
// it made 8 and 16 streams 7-12% slower on the avx2 copy.
template <class B>
void prefetch_ahead(const uint8_t* g, int64_t b) {
  constexpr size_t kChunkBytes = q8_packed::kPackedBlockBytes<B> / q8_packed::kChunksPerBlock<B>;
  const auto* ahead = reinterpret_cast<const char*>(g + size_t(b) * kChunkBytes + 1024);
  for (size_t line = 0; line < kChunkBytes; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T0);
}

// Quads v and v + 4 of a chunk that unpack_loaded wrote at u.
template <class V>
[[gnu::always_inline]] inline Quads<V> loaded_quads(const uint8_t* u, int v) {
  return {V::load(u + q8_packed::kVector * v), V::load(u + q8_packed::kVector * (v + 4))};
}

// Q4_K's loaded chunks (kLoaded) leave each half's sum apart (16 codes of at most 15 times
// activations of at most 127: within int16), and each goes times the chunk's scale by one
// vpdpwssd: the scale in the low word of each lane and zero in the high one, which holds the sum's
// sign. No vpmulld (two uops) and no add to join the halves: one thread of the 2-core Xeon without
// AMX, BM_MatmulPacked n_out 2048, best of 6 alternating, 32-512 tokens 1.11-1.14x; 1B Q4_K_M
// prefill of 512 tokens 248-254 -> 272-281 tokens/s. Q5_K's halves (codes up to 31) can overflow
// int16; started at -16 times their sums of q (broadcast from a side array) and added back by the
// super-block, they fitted, with 16 fewer vector uops a chunk of eight tokens, but ran no faster
// (0.98-1.01x): not kept.
template <class B>
constexpr bool kHalfSumsScaled = std::is_same_v<B, BlockQ4_K>;

// Chunk k's exact integer sums against each of T tokens' activation blocks x (kHalfScales: each
// half apart, the second in hi). kLoaded: k.codes are a chunk as unpack_loaded wrote it; there each
// token's sum goes in two chains of four vpdpbusd, the low quads' and the high ones', added at the
// end: one chain of eight (40 cycles of latency) made the tile wait (one thread of the 2-core Xeon
// without AMX, BM_MatmulPacked n_out 2048 k 2048 64 tokens, best of 9 alternating: Q4_K 1714 ->
// 1655 us, Q5_K 1718 -> 1656, IQ4_XS 1580 -> 1484; with the codes unpacked in the tile, where the
// second chain's registers are scarcer, about even).
template <class B, class V, int T, bool kLoaded = false>
[[gnu::always_inline]] inline void chunk_sums(const Chunk<V>& k, const ActBlock* const (&x)[T], typename V::I (&lo)[T],
                                              typename V::I (&hi)[T]) {
  constexpr bool kHalves = kHalfScales<B>;
  constexpr bool kTwoChains = kLoaded && !kHalves;
  for (int t = 0; t < T; ++t) {
    lo[t] = sum_start<B, V>(*x[t], false);
    if constexpr (kHalves) hi[t] = sum_start<B, V>(*x[t], true);
    if constexpr (kTwoChains) hi[t] = V::each_dword(0);
  }
  using I = typename V::I;
  I part[T];  // without VNNI: pair sums of unsigned codes not yet widened
  each_quad([&](auto v) {
    const Quads<V> q = kLoaded ? loaded_quads<V>(k.codes, v) : quads<B, V, v>(k);
    for (int t = 0; t < T; ++t) {
      if constexpr (kHalves) {
        lo[t] = dot<B, V>(lo[t], q.lo, x_quad<V>(*x[t], v));
        hi[t] = dot<B, V>(hi[t], q.hi, x_quad<V>(*x[t], v + 4));
      } else if constexpr (kTwoChains) {
        lo[t] = dot<B, V>(lo[t], q.lo, x_quad<V>(*x[t], v));
        hi[t] = dot<B, V>(hi[t], q.hi, x_quad<V>(*x[t], v + 4));
      } else if constexpr (kVnni || kSignedCodes<B>) {
        lo[t] = dot<B, V>(dot<B, V>(lo[t], q.lo, x_quad<V>(*x[t], v)), q.hi, x_quad<V>(*x[t], v + 4));
      } else {
        const I p = V::add16(V::pairs(q.lo, x_quad<V>(*x[t], v)), V::pairs(q.hi, x_quad<V>(*x[t], v + 4)));
        part[t] = v % kQuadsInInt16 == 0 ? p : V::add16(part[t], p);
        if constexpr ((v + 1) % kQuadsInInt16 == 0) lo[t] = V::add32(lo[t], V::madd16(part[t], V::each_dword(0x00010001)));
      }
    }
  });
  if constexpr (kTwoChains && !kHalfSumsScaled<B>) {
    for (int t = 0; t < T; ++t) lo[t] = V::add32(lo[t], hi[t]);
  }
}

// Without VNNI, from kUnpackFrom tokens on, a group's codes are unpacked once for every token of a
// block (unpack_codes, into a buffer of the thread's) rather than once for every tile of four:
// chunk c's quad vectors i = 0..7 of each eight-row half h (elements 4 i .. 4 i + 3 of each row as
// quads() gives them, the first half's, then the second's) at (c * H + h) * kUnpackedBytes + 32 i.
// The tile then only multiplies and adds: maddubs results add up in int16 over runs of kRun
// vectors, then one madd by the run's scale (ones where the scale is a float's) widens them; with
// AVX2 a tile takes both halves of the group (H = 2) for three tokens, so that each token's
// broadcast serves sixteen rows. The same integers as the other paths, so the same bits. Against
// unpacking in the tile, on the 2-core EPYC (Zen 4 without AVX-512), BM_MatmulPacked n_out 2048 k
// 5632, 64 tokens, best of 15 alternating: Q4_K 6000 -> 5124 us, Q5_K 6874 -> 5571, Q6_K 7097 ->
// 5584, IQ4_XS 8987 -> 8387; then both halves at once, best of 15: Q4_K 5304 -> 4401, Q6_K 6068 ->
// 5156, Q5_K 5291 -> 4813, IQ4_XS 8343 -> 7571 (Q8_0 and Q4_1 at k 576 or 1536 within the noise,
// 2-10% either way). llvm-mca (znver3) counts a four-token chunk of eight rows of Q6_K 51 -> 36 ->
// 38 cycles, Q4_K 34 -> 27 -> 27, IQ4_XS 45 -> 41, Q8_0 51 -> 48 -> 45.
constexpr size_t kUnpackedChunk = 8 * sizeof(__m256i);
// A half's chunk unpacked: signed codes (the sign trick) as their magnitudes, then as they are for
// their signs, which spares the tile a vpsignb a code vector.
template <class B>
constexpr size_t kUnpackedBytes = kSignedCodes<B> ? 2 * kUnpackedChunk : kUnpackedChunk;

// The largest unsigned code of a format; its maddubs results are pairs of products with activations
// of at most 127.
template <class B>
constexpr int kMaxCode = std::is_same_v<B, BlockQ6_K>                                          ? 63
                         : kFifthBit<B>                                                        ? 31
                         : std::is_same_v<B, BlockQ3_K>                                        ? 7
                         : std::is_same_v<B, BlockQ2_K>                                        ? 3
                                                                                               : 15;
// Signed codes (the sign trick, a pair of products up to 2 * 127 * 127) one vector a run; within a
// half where halves scale apart.
template <class B>
constexpr int kRun = kSignedCodes<B> ? 1 : std::min(kHalfScales<B> ? 4 : 8, 32767 / (2 * 127 * kMaxCode<B>));

// Chunks 0 .. nb - 1 of H eight-row halves of group g from row0, chunk by chunk.
template <class B, int H>
void unpack_codes(const uint8_t* g, int64_t nb, int row0, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b) {
    for (int h = 0; h < H; ++h, out += kUnpackedBytes<B>) {
      const Chunk<Ymm> k = chunk_at<B, Ymm>(g, b, row0 + h * Ymm::kLanes);
      each_quad([&](auto v) {
        const Quads<Ymm> q = quads<B, Ymm, v>(k);
        if constexpr (kSignedCodes<B>) {
          Ymm::store_bytes(out + sizeof(__m256i) * v, Ymm::sign(q.lo, q.lo));
          Ymm::store_bytes(out + sizeof(__m256i) * (v + 4), Ymm::sign(q.hi, q.hi));
          Ymm::store_bytes(out + kUnpackedChunk + sizeof(__m256i) * v, q.lo);
          Ymm::store_bytes(out + kUnpackedChunk + sizeof(__m256i) * (v + 4), q.hi);
        } else {
          Ymm::store_bytes(out + sizeof(__m256i) * v, q.lo);
          Ymm::store_bytes(out + sizeof(__m256i) * (v + 4), q.hi);
        }
      });
    }
  }
}

// With AVX-512 VNNI, for the super-scaled formats from kLoadFrom tokens on, a group's codes are
// likewise unpacked once for every token of a block: chunk c's eight vectors as quads() gives them
// (quads 0-3 low, then high) at c * kLoadedChunk, which the tiles load (loaded_quads) instead of
// unpacking them for every tile of eight tokens. A token's chunk then costs its 8 vpdpbusd, its
// scale's vpmulld (2 uops) and two adds; unpacking in the tile cost Q5_K 27 uops more a chunk
// (about 4 a token). The same integers, so the same bits. One thread of a 2-core Xeon (AVX-512
// VNNI, no AMX), BM_MatmulPacked n_out 2048, best of 6 alternating, k 2048 64 tokens: Q2_K 2021 ->
// 1877 us, Q3_K 2150 -> 1840, Q4_K 1728 -> 1651, Q5_K 1865 -> 1683, IQ4_XS 1615 -> 1472; 512
// tokens 1.06-1.17x (Q5_K k 5632: 44925 -> 39968); 32 tokens 0.98-1.07x, 24 0.94-1.02, 16
// 0.85-0.92 (hence kLoadFrom). Q8_0 and Q4_1 (one fma a chunk) about even: not taken. Prefill of
// 512 tokens (bench_forward, both threads, three rounds alternating), 1B-shaped files: Q5_K_M
// 186-212 -> 233-244 tokens/s, IQ4_XS 260-262 -> 278-285.
// Q6_K too: its two half scales cost two vpmulld a token's chunk, where it went instead by int16
// codes times their scales (16 vpdpwssd a token's chunk, once the fastest on that Xeon, whose
// vpmulld takes two uops: 16 vector uops either way). On a 2-core Zen 5 (AMD family 26, vpmulld
// one uop at two a cycle, as vpdpbusd), one thread, BM_MatmulPacked Q6_K, best of 3 alternating:
// 32 tokens 950 -> 745 us, 64 1781 -> 1363, 512 15092 -> 11683 (n_out 5632 k 2048); prefill of
// 512 tokens of the 1B-shaped Q6_K file 273-292 -> 384-403 tokens/s (llama.cpp 276-309).
constexpr size_t kLoadedChunk = 8 * q8_packed::kVector;

template <class B, class V>
void unpack_loaded(const uint8_t* g, int64_t nb, uint8_t* out) {
  for (int64_t b = 0; b < nb; ++b, out += kLoadedChunk) {
    const Chunk<V> k = chunk_at<B, V>(g, b, 0);
    each_quad([&](auto v) {
      const Quads<V> q = quads<B, V, v>(k);
      V::store_bytes(out + q8_packed::kVector * v, q.lo);
      V::store_bytes(out + q8_packed::kVector * (v + 4), q.hi);
    });
  }
}

// sums[t][h] += the unpacked chunk of half h at u times token t's activations, each run times its
// scale (the int16 pairs s_lo[h] for the first half of the chunk, s_hi[h] for the second). A
// token's broadcast quad serves both halves. The empty asm statements keep GCC from reassociating
// a run's adds into a tree whose partial sums spill (Q4_K's chunk: 45 cycles without them in
// llvm-mca, 27 with).
template <class B, int T, int H>
[[gnu::always_inline]] inline void add_unpacked(const uint8_t* u, const __m256i (&s_lo)[H], const __m256i (&s_hi)[H],
                                                const ActBlock* const (&x)[T], __m256i (&sums)[T][H]) {
  constexpr int R = kRun<B>;
#pragma GCC unroll 8
  for (int r = 0; r < 8 / R; ++r) {
    __m256i run[T][H];
#pragma GCC unroll 8
    for (int i = r * R; i < (r + 1) * R; ++i) {
      __m256i w[H], aw[H];
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        const uint8_t* codes = u + kUnpackedBytes<B> * h + sizeof(__m256i) * i;
        aw[h] = Ymm::load(codes);
        if constexpr (kSignedCodes<B>) w[h] = Ymm::load(codes + kUnpackedChunk);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i xq = x_quad<Ymm>(*x[t], i);
#pragma GCC unroll 2
        for (int h = 0; h < H; ++h) {
          const __m256i p = Ymm::pairs(aw[h], kSignedCodes<B> ? Ymm::sign(xq, w[h]) : xq);
          run[t][h] = i == r * R ? p : Ymm::add16(run[t][h], p);
          asm("" : "+v"(run[t][h]));
        }
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 2
      for (int h = 0; h < H; ++h) {
        sums[t][h] = Ymm::add32(sums[t][h], Ymm::madd16(run[t][h], r * R < 4 ? s_lo[h] : s_hi[h]));
        asm("" : "+v"(sums[t][h]));
      }
    }
  }
}

// Rows row0 + h * V::kLanes + (0 .. V::kLanes - 1) of a group, h < H, of which rows are real.
template <class V>
[[gnu::always_inline]] inline void store_halves(float* y, const typename V::F& v, int h, int rows) {
  const int real = std::min(V::kLanes, rows - h * V::kLanes);
  if (real > 0) V::store(y + h * V::kLanes, v, real);
}

// T tokens (t = 0 .. T-1 of a) against H vectors' rows of the group from row0 (rows of them real),
// one fma per chunk. H is 2 only for unpacked codes (kUnpacked), whose broadcasts both halves share.
template <class B, class V, int T, int H, bool kUnpacked>
void chunk_group_tile(const uint8_t* g, const uint8_t* unpacked, Acts a, int64_t nb, float* y, int64_t n_out,
                      int row0, int rows, bool fetch) {
  static_assert(H == 1 || kUnpacked);
  using I = typename V::I;
  using F = typename V::F;
  F acc[T][H], off[T][H];
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) acc[t][h] = off[t][h] = V::zero();
  for (int64_t b = 0; b < nb; ++b) {
    if (!kUnpacked && fetch) prefetch_ahead<B>(g, b);
    Chunk<V> k[H];
    for (int h = 0; h < H; ++h) k[h] = chunk_at<B, V>(g, b, row0 + h * V::kLanes);
    const ActBlock* x[T];
    for (int t = 0; t < T; ++t) x[t] = &a.at(t, b);
    I sums[T][H];
    if constexpr (kUnpacked) {
      I ones[H];
      for (int h = 0; h < H; ++h) ones[h] = V::each_dword(0x00010001);
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < H; ++h) sums[t][h] = sum_start<B, V>(*x[t], false);
      add_unpacked<B, T, H>(unpacked + b * H * kUnpackedBytes<B>, ones, ones, x, sums);
    } else {
      I lo[T], unused[T];
      chunk_sums<B, V, T>(k[0], x, lo, unused);
      for (int t = 0; t < T; ++t) sums[t][0] = lo[t];
    }
    for (int t = 0; t < T; ++t) {
      const F xd = V::each_float(x[t]->d);
      for (int h = 0; h < H; ++h) {
        acc[t][h] = V::fma(V::to_float(sums[t][h]), V::mul(k[h].d, xd), acc[t][h]);
        if constexpr (kOffset<B> != Offset::None) off[t][h] = V::fma(k[h].off, V::each_float(x[t]->s), off[t][h]);
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) store_halves<V>(y + t * n_out + row0, V::add(acc[t][h], off[t][h]), h, rows);
}

// A super-scaled chunk's integer scales for the rows one vector holds (kHalfScales: of each half).
template <class V>
struct IntScales {
  typename V::I lo, hi;
};
template <class B, class V>
[[gnu::always_inline]] inline IntScales<V> int_scales(const uint8_t* p, int c, int row0) {
  constexpr bool kSigned = !kAffineK<B> && !std::is_same_v<B, BlockQ2_K>;
  if constexpr (!kHalfScales<B>) {
    const auto sc = V::template ints<kSigned>(scales_at<B>(p, c, 0) + row0);
    return {sc, sc};
  } else {
    IntScales<V> sc{V::template ints<kSigned>(scales_at<B>(p, c, 0) + row0),
                    V::template ints<kSigned>(scales_at<B>(p, c, 1) + row0)};
    if constexpr (std::is_same_v<B, BlockQ2_K>) {
      const auto low_nibble = V::each_dword(0x0f);  // less the minimums
      sc = {V::and_(sc.lo, low_nibble), V::and_(sc.hi, low_nibble)};
    }
    return sc;
  }
}

// Without VNNI (kVnni), for the formats that scale each half apart (Q6_K, Q3_K, Q2_K) and more than
// one token: a chunk's products pass through int16 pairs (maddubs) before a madd widens them to
// int32, and that madd takes the half's scale instead of ones. This spares two 32-bit multiplies a
// token and the per-half sums that kept the tile's registers spilling, and adds in int16 as many
// pairs as cannot overflow (kPairSums). The codes' bias comes off as -bias times the scales times
// the halves' sums of q, one more madd. These are the other path's exact integers. Bounds: |x| <=
// 127, every scale (times the bias too) fits in int16, a super-block's sum within 256 * 63 * 127 * 128.
// Measured on a 2-core Zen 4 (AVX2 alone), BM_MatmulPacked k:5632 tokens:64, best of 15: Q6_K 8.55 -> 7.02 ms,
// Q2_K 9.58 -> 7.03, Q3_K 7.85 -> 7.76. Q4_K, Q5_K and IQ4_XS (one scale a chunk, one multiply)
// gained nothing measurable and keep the other path; so does a single token (YmmPair), which ran
// 2x slower this way.
// Maddubs results of a half that add in int16 before a madd, each a pair of products of a code and
// an activation: Q6_K's codes of up to 63 allow two (2 * 2 * 63 * 127 <= 32767), Q3_K's (7) and
// Q2_K's (3) all four of the half.
template <class B>
constexpr int kPairSums = std::is_same_v<B, BlockQ6_K> ? 2 : 4;

// Two int32 lanes' low 16 bits as the int16 pair of one lane (the first low, the second high).
template <class V>
[[gnu::always_inline]] inline typename V::I int16_pair(typename V::I low, typename V::I high) {
  return V::or_(V::and_(low, V::each_dword(0xffff)), V::template shl32<16>(high));
}

// sums[t][h] += -kCodeBias times each half's scale (sc, vector h's) times its sum of q.
template <class B, class V, int T, int H>
[[gnu::always_inline]] inline void add_code_bias(const IntScales<V>& sc, const ActBlock* const (&x)[T],
                                                 typename V::I (&sums)[T][H], int h) {
  if constexpr (kCodeBias<B> != 0) {
    const auto bias = V::each_dword(-kCodeBias<B>);
    const auto s_bias = int16_pair<V>(V::mul32(sc.lo, bias), V::mul32(sc.hi, bias));
    for (int t = 0; t < T; ++t) sums[t][h] = V::add32(sums[t][h], V::madd16(s_bias, V::each_dword(half_pair(*x[t]))));
  }
}

// sums[t] += the chunk's products with each token, times their halves' scales.
template <class B, class V, int T>
[[gnu::always_inline]] inline void add_scaled_halves(const Chunk<V>& k, const IntScales<V>& sc,
                                                     const ActBlock* const (&x)[T], typename V::I (&sums)[T][1]) {
  static_assert(kHalfScales<B> && !kSignedCodes<B>);
  using I = typename V::I;
  constexpr int kN = kPairSums<B>;
  const I s_lo = int16_pair<V>(sc.lo, sc.lo), s_hi = int16_pair<V>(sc.hi, sc.hi);
  add_code_bias<B, V, T, 1>(sc, x, sums, 0);
  I lo[T], hi[T];  // pair sums of each half not yet widened
  each_quad([&](auto v) {
    const Quads<V> q = quads<B, V, v>(k);
    for (int t = 0; t < T; ++t) {
      const I pl = V::pairs(q.lo, x_quad<V>(*x[t], v)), ph = V::pairs(q.hi, x_quad<V>(*x[t], v + 4));
      lo[t] = v % kN == 0 ? pl : V::add16(lo[t], pl);
      hi[t] = v % kN == 0 ? ph : V::add16(hi[t], ph);
      if constexpr ((v + 1) % kN == 0) {
        sums[t][0] = V::add32(sums[t][0], V::madd16(lo[t], s_lo));
        sums[t][0] = V::add32(sums[t][0], V::madd16(hi[t], s_hi));
      }
    }
  });
}

// chunk_group_tile for the super-scaled formats: a super-block's chunk sums times their scales
// (and minimums times the chunks' or halves' sums of q) in int32, then one fma each.
template <class B, class V, int T, int H, bool kUnpacked>
void super_group_tile(const uint8_t* g, const uint8_t* unpacked, Acts a, int64_t nb, float* y, int64_t n_out,
                      int row0, int rows, bool fetch) {
  static_assert(H == 1 || kUnpacked);
  constexpr bool kHalves = kHalfScales<B>;
  using I = typename V::I;
  using F = typename V::F;
  F acc[T][H], off[T][H];
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) acc[t][h] = off[t][h] = V::zero();
  for (int64_t s = 0; s < nb; s += 8) {
    const uint8_t* p = packed_block<B>(g, s);
    I sums[T][H];
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) sums[t][h] = V::each_dword(0);
    for (int c = 0; c < 8; ++c) {
      if (!kUnpacked && fetch) prefetch_ahead<B>(g, s + c);
      const ActBlock* x[T];
      for (int t = 0; t < T; ++t) x[t] = &a.at(t, s + c);
      if constexpr (kUnpacked && !kVnni) {
        IntScales<V> sc[H];
        I s_lo[H], s_hi[H];
        for (int h = 0; h < H; ++h) {
          sc[h] = int_scales<B, V>(p, c, row0 + h * V::kLanes);
          s_lo[h] = int16_pair<V>(sc[h].lo, sc[h].lo);
          s_hi[h] = int16_pair<V>(sc[h].hi, sc[h].hi);
        }
        add_unpacked<B, T, H>(unpacked + (s + c) * H * kUnpackedBytes<B>, s_lo, s_hi, x, sums);
        for (int h = 0; h < H; ++h) add_code_bias<B, V, T, H>(sc[h], x, sums, h);
      } else {
        const IntScales<V> sc = int_scales<B, V>(p, c, row0);
        Chunk<V> k = chunk_at<B, V>(g, s + c, row0);
        if constexpr (kUnpacked) k.codes = unpacked + (s + c) * kLoadedChunk;
        if constexpr (kVnni || !kHalves || T == 1) {
          I lo[T], hi[T];
          chunk_sums<B, V, T, kUnpacked>(k, x, lo, hi);
          for (int t = 0; t < T; ++t) {
            if constexpr (kUnpacked && kHalfSumsScaled<B>) {  // (kUnpacked here: unpack_loaded's)
              sums[t][0] = V::add_madd16(V::add_madd16(sums[t][0], lo[t], sc.lo), hi[t], sc.lo);
              continue;
            }
            sums[t][0] = V::add32(sums[t][0], V::mul32(lo[t], sc.lo));
            if constexpr (kHalves) sums[t][0] = V::add32(sums[t][0], V::mul32(hi[t], sc.hi));
          }
        } else {
          add_scaled_halves<B, V, T>(k, sc, x, sums);
        }
      }
    }
    for (int h = 0; h < H; ++h) {
      const int r0 = row0 + h * V::kLanes;
      I mins[T];
      for (int t = 0; t < T; ++t) mins[t] = V::each_dword(0);
      if constexpr (kAffineK<B>) {
        for (int j = 0; j < 4; ++j) {
          const I m = minimum_pair<V>(p, j, r0);
          for (int t = 0; t < T; ++t) mins[t] = V::add_madd16(mins[t], m, V::each_dword(a.pair(t, s + 2 * j)));
        }
      }
      if constexpr (std::is_same_v<B, BlockQ2_K>) {
        for (int c = 0; c < 8; ++c) {
          const I m = half_minimums<V>(p, c, r0);
          for (int t = 0; t < T; ++t) {
            mins[t] = V::add32(mins[t], V::madd16(m, V::each_dword(half_pair(a.at(t, s + c)))));
          }
        }
      }
      const F d = V::halves(p + 2 * r0);
      for (int t = 0; t < T; ++t) {
        const F xd = V::each_float(a.at(t, s).d);
        acc[t][h] = V::fma(V::to_float(sums[t][h]), V::mul(d, xd), acc[t][h]);
        if constexpr (kMinimums<B>) {
          const F neg_dmin = V::negate(V::halves(p + kDminAt<B> + 2 * r0));
          off[t][h] = V::fma(V::to_float(mins[t]), V::mul(neg_dmin, xd), off[t][h]);
        }
      }
    }
  }
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) store_halves<V>(y + t * n_out + row0, V::add(acc[t][h], off[t][h]), h, rows);
}

// Not inlined: a tile is a function of its own, as when tiles() called each shape from its own line
// (inlined into each_tile's lambdas, the avx2 copy's Q4_K ran 6% slower at 64 tokens).
template <class B, class V, int T, int H, bool kUnpacked>
[[gnu::noinline]] void group_tile(const uint8_t* g, const uint8_t* unpacked, Acts a, int64_t nb, float* y, int64_t n_out,
                int row0, int rows, bool fetch) {
  if constexpr (kSuper<B>) super_group_tile<B, V, T, H, kUnpacked>(g, unpacked, a, nb, y, n_out, row0, rows, fetch);
  else chunk_group_tile<B, V, T, H, kUnpacked>(g, unpacked, a, nb, y, n_out, row0, rows, fetch);
}

#include "kernels/cpu/ops/matmul_q8_packed_amx.inc"

// Tokens per tile: as many as the vector registers hold accumulators for (sixteen with AVX2,
// thirty-two with AVX-512).
#if defined(FLASHSERVE_AVX512)
constexpr int kTokens = 8;
#else
constexpr int kTokens = 4;
#endif
// Unpacked codes' tiles take both halves of a group at once where the registers hold three tokens'
// int16 runs and int32 sums for both (AVX2). With AVX-512's thirty-two registers, tiles of eight
// tokens a half at a time counted about as many cycles in llvm-mca (skylake-avx512) as pairs of
// halves of three, four or six tokens (Q8_0 65 against 62-69 a chunk of four tokens and eight rows,
// Q6_K 38 against 41-47, IQ4_XS 59 against 54-68): that copy keeps them.
#if defined(FLASHSERVE_AVX512)
constexpr int kUnpackedHalves = 1;
#else
constexpr int kUnpackedHalves = 2;
#endif
constexpr int kPairTokens = 3;

// Calls f.template operator()<T>(t) for the tiles of num_tokens tokens, in order: of kT tokens, then
// (kT > 4) one of four, then twos and a one. Where tiles of three would leave one token, the last
// four go by twos: a tile of one passes the codes at a third of the rate.
template <int kT, class F>
void each_tile(int64_t num_tokens, F&& f) {
  int64_t full = num_tokens / kT;
  if (kT == 3 && num_tokens % kT == 1 && full > 0) --full;
  int64_t t = 0;
  for (; t < full * kT; t += kT) f.template operator()<kT>(t);
  if constexpr (kT > 4) {
    if (t + 4 <= num_tokens) f.template operator()<4>(t), t += 4;
  }
  for (; t + 2 <= num_tokens; t += 2) f.template operator()<2>(t);
  if (t < num_tokens) f.template operator()<1>(t);
}

// The tile from token t of x's num_tokens (x's first token starts a run: kRunTokens).
inline Acts tile_acts(const TokenBlock& x, int64_t num_tokens, int64_t nb, int64_t t) {
  const int64_t run = t / kRunTokens * kRunTokens, first = run * nb + (t - run);
  return {x.a + first, kRunTokens == 1 ? nb : std::min<int64_t>(kRunTokens, num_tokens - run),
          x.pairs ? x.pairs + first : nullptr};
}

// fetch: whether the first tile reads the group from memory (and so prefetches it). The unpacked
// tiles are always passed false, and also test kUnpacked: without that constant GCC keeps the
// prefetch loop in them (10-12 more instructions each in the avx2 copy).
template <class B, class V, int H, bool kUnpacked>
void tiles(const uint8_t* g, const uint8_t* u, const TokenBlock& a, int64_t num_tokens, int64_t nb, float* y,
           int64_t n_out, int row0, int rows, bool fetch) {
  constexpr int kT = H == 2 ? kPairTokens : kTokens;
  static_assert(kRunTokens == 1 || kRunTokens == kT);
  each_tile<kT>(num_tokens, [&]<int T>(int64_t t) {
    group_tile<B, V, T, H, kUnpacked>(g, u, tile_acts(a, num_tokens, nb, t), nb, y + t * n_out, n_out, row0, rows,
                                      fetch && t == 0);
  });
}

// At 8 tokens (two tiles) unpacking first is about even for Q4_K (BM_MatmulPacked k 5632: 682 ->
// 701 us) and ahead for Q6_K (907 -> 787); from 12 on ahead for both.
constexpr int64_t kUnpackFrom = 8;
constexpr int64_t kLoadFrom = 32;

// A group's rows (rows of them real) against num_tokens tokens.
template <class B>
void vector_rows(const uint8_t* g, const TokenBlock& a, int64_t num_tokens, int64_t nb, float* y, int64_t n_out,
                 int rows) {
#if defined(__AVX512VNNI__)
  if constexpr (kSuper<B>) {
    if (num_tokens >= kLoadFrom) {
      struct alignas(64) LoadedChunk {  // a type of this copy's own, as UnpackedChunk below
        uint8_t bytes[kLoadedChunk];
      };
      thread_local std::vector<LoadedChunk> loaded;
      if (loaded.size() < size_t(nb)) loaded.resize(size_t(nb));
      uint8_t* u = loaded.data()->bytes;
      unpack_loaded<B, Zmm>(g, nb, u);
      return tiles<B, Zmm, 1, true>(g, u, a, num_tokens, nb, y, n_out, 0, rows, false);
    }
  }
#endif
  if constexpr (std::is_same_v<Wide, Ymm> && !kVnni) {
    if (num_tokens >= kUnpackFrom) {
      // 128 KB for k = 8192 with AVX2, 256 KB for signed codes. (A type of this copy's own: a
      // std::vector of bytes would be a weak symbol shared with the other copies.)
      struct alignas(32) UnpackedChunk {
        uint8_t bytes[kUnpackedHalves * 2 * kUnpackedChunk];
      };
      thread_local std::vector<UnpackedChunk> unpacked;
      if (unpacked.size() < size_t(nb)) unpacked.resize(size_t(nb));
      uint8_t* u = unpacked.data()->bytes;
      for (int row0 = 0; row0 < rows; row0 += kUnpackedHalves * Ymm::kLanes) {
        const int real = std::min(kUnpackedHalves * Ymm::kLanes, rows - row0);
        if constexpr (kUnpackedHalves == 2) {
          if (real > Ymm::kLanes) {
            unpack_codes<B, 2>(g, nb, row0, u);
            tiles<B, Ymm, 2, true>(g, u, a, num_tokens, nb, y, n_out, row0, real, false);
            continue;
          }
        }
        unpack_codes<B, 1>(g, nb, row0, u);
        tiles<B, Ymm, 1, true>(g, u, a, num_tokens, nb, y, n_out, row0, real, false);
      }
      return;
    }
  }
  for (int row0 = 0; row0 < rows; row0 += Wide::kLanes) {
    tiles<B, Wide, 1, false>(g, nullptr, a, num_tokens, nb, y, n_out, row0, std::min(Wide::kLanes, rows - row0), row0 == 0);
  }
}

template <class B>
void group_rows(const uint8_t* g, const TokenBlock& a, int64_t num_tokens, int64_t nb, float* y, int64_t n_out,
                int rows) {
#if !defined(__AVX512VNNI__)
  if (num_tokens == 1) {
    return group_tile<B, YmmPair, 1, 1, false>(g, nullptr, tile_acts(a, 1, nb, 0), nb, y, n_out, 0, rows, true);
  }
#endif
  vector_rows<B>(g, a, num_tokens, nb, y, n_out, rows);
}
#else
#include "kernels/cpu/ops/matmul_q8_packed_scalar.inc"
#endif


// Threads take contiguous runs of groups: each reads its weights front to back (a single token
// asks for them 1 KB ahead: prefetch_ahead). Tokens go by blocks whose activations stay in a core's L2 (64 tokens of k = 8,192 take
// 850 KB) while every group of the run passes them.
constexpr int64_t kTokenBlock = 64;
static_assert(kTokenBlock % kRunTokens == 0);
template <class B>
void matmul_groups(const float* xf, int64_t num_tokens, int64_t k, const uint8_t* w, int64_t n_out, float* y) {
  const int64_t nb = k / q8::kBlock;
  const int64_t group = kSuper<B> ? kSuperBlock : q8::kBlock;
#if defined(__AMX_INT8__)
  const bool by_tiles = num_tokens >= amx::kMinTokens<B>;
#else
  constexpr bool by_tiles = false;
#endif
  const int64_t run = by_tiles ? 1 : kRunTokens;
  const ActBlock* a = q8::quantize_rows(xf, num_tokens, k, group, run);
  TokenBlock acts{a, nullptr};
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
  if (kAffineK<B> && !by_tiles) acts.pairs = chunk_pair_sums(a, num_tokens, nb, run);
#endif
  const int64_t groups = (n_out + kRows - 1) / kRows;
  const size_t group_bytes = size_t(nb / q8_packed::kChunksPerBlock<B>) * q8_packed::kPackedBlockBytes<B>;
#if defined(__AMX_INT8__)
  // Enough tokens go by tiles, all of them, a group's codes unpacked once for a block of them.
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
        group_rows<B>(w + g * group_bytes, acts.from(t0 * nb), tokens, nb, y + t0 * n_out + g * kRows, n_out, rows);
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
  const auto* w = static_cast<const uint8_t*>(packed);
  q8_packed::visit_packed(wtype, [&](auto block) { matmul_groups<decltype(block)>(x, num_tokens, k, w, n_out, y); });
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
