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

// What a chunk adds besides codes times scale (matmul_q8's offsets): Q4_1 and Q5_1 their minimum
// times the activations' sum (Q4_K and Q5_K minus dmin times the chunk's minimum), Q4_0 -8 d times
// it (its codes 0..15 stand for -8..7); Q8_0, IQ4, Q5_0 and Q6_K (whose codes' bias comes off
// exactly) nothing.
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
// What the unsigned codes of Q6_K (six bits) and Q5_0 (five) stand for is the code less this.
template <class B>
constexpr int kCodeBias = std::is_same_v<B, BlockQ6_K> ? 32 : std::is_same_v<B, BlockQ5_0> ? 16 : 0;
template <class B>
constexpr Offset kOffset = std::is_same_v<B, BlockQ4_1> || std::is_same_v<B, BlockQ5_1> || kAffineK<B> ? Offset::Min
                           : std::is_same_v<B, BlockQ4_0>                                          ? Offset::MinusEightD
                                                                                                   : Offset::None;
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
  static F bytes(const uint8_t* p) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm256_cvtepi32_ps(kSigned ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b));
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
  static I shuffle(I table, I idx) { return _mm256_shuffle_epi8(table, idx); }
  static I add_sums(I acc, I w, I x) { return q8::add_lane_sums(acc, w, x); }
  static I add32(I a, I b) { return _mm256_add_epi32(a, b); }
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
  static F bytes(const uint8_t* p) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm512_cvtepi32_ps(kSigned ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b));
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
  static I shuffle(I table, I idx) { return _mm512_shuffle_epi8(table, idx); }
  static I sub8(I a, I b) { return _mm512_sub_epi8(a, b); }
  static I add_sums(I acc, I w, I x) { return _mm512_dpbusd_epi32(acc, w, x); }
  static I add32(I a, I b) { return _mm512_add_epi32(a, b); }
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

// A chunk of the rows one vector holds: their scales (Q6_K: of elements 0-15; d_hi of 16-31),
// offsets (Q4_1, Q4_K, Q5_K: minimums; Q4_0: -8 d) and where their codes are.
template <class V>
struct Chunk {
  typename V::F d, d_hi, off;
  const uint8_t* codes;  // nibble vectors, or Q8_0's code vectors
  const uint8_t* highs;  // fifth bits (Q5_0, Q5_1, Q5_K), Q6_K's high two bits
};

// Chunk b of the group's rows row0 .. row0 + V::kLanes - 1. Always inlined: called, it makes the
// tile spill every accumulator around the call once a chunk (GCC declined to inline Q5_K's, which
// cost a sixth of its time).
template <class B, class V>
[[gnu::always_inline]] inline Chunk<V> chunk_at(const uint8_t* g, int64_t b, int row0) {
  const uint8_t* p = packed_block<B>(g, b);
  const int c = chunk_of<B>(b);
  Chunk<V> k;
  k.d = V::halves(p + 2 * row0);
  k.d_hi = k.off = V::zero();
  k.highs = nullptr;
  if constexpr (kAffineK<B>) {
    // d * sc and -(dmin * m), as matmul_q8 computes them (codec::k_affine).
    k.d = V::mul(k.d, V::template bytes<false>(p + q4k::kScalesAt + kRows * c + row0));
    const auto min = V::mul(V::halves(p + q4k::kDminAt + 2 * row0), V::template bytes<false>(p + q4k::kMinsAt + kRows * c + row0));
    k.off = V::negate(min);
    k.codes = p + q4k::kCodesAt + q4k::kChunkCodes * c;
    if constexpr (std::is_same_v<B, BlockQ5_K>) k.highs = p + q4k::kHighsAt + q4k::kChunkHighs * c + 4 * row0;
  } else if constexpr (std::is_same_v<B, BlockQ6_K>) {
    k.d_hi = V::mul(k.d, V::template bytes<true>(p + q6k::kScalesAt + kRows * (2 * c + 1) + row0));
    k.d = V::mul(k.d, V::template bytes<true>(p + q6k::kScalesAt + kRows * 2 * c + row0));
    k.codes = p + q6k::kChunksAt + q6k::kChunkBytes * c;
    k.highs = k.codes + q6k::kChunkLow + 4 * row0;
  } else if constexpr (std::is_same_v<B, BlockIQ4_XS>) {
    k.d = V::mul(k.d, V::template bytes<true>(p + iq4xs::kScalesAt + kRows * c + row0));
    k.codes = p + iq4xs::kCodesAt + iq4xs::kChunkCodes * c;
  } else {
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
  if constexpr (std::is_same_v<B, BlockQ6_K>) return V::each_dword(-kCodeBias<B> * (high_half ? ab.sum_hi : ab.sum_lo));
  if constexpr (kCodeBias<B> != 0) return V::each_dword(-kCodeBias<B> * (ab.sum_lo + ab.sum_hi));
  if constexpr (kSignedCodes<B> && kVnni) return V::each_dword(-128 * (ab.sum_lo + ab.sum_hi));
  return V::each_dword(0);
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
}

// T tokens (t = 0 .. T-1 of a) against the group's rows row0 .. row0 + rows - 1 (one vector's).
template <class B, class V, int T>
void group_tile(const uint8_t* g, const ActBlock* a, int64_t nb, float* y, int64_t n_out, int row0, int rows) {
  constexpr bool kHalves = std::is_same_v<B, BlockQ6_K>;
  using I = typename V::I;
  using F = typename V::F;
  F acc[T], off[T];
  for (int t = 0; t < T; ++t) acc[t] = off[t] = V::zero();
  for (int64_t b = 0; b < nb; ++b) {
    if constexpr (T == 1) prefetch_ahead<B>(g, b);
    const Chunk<V> k = chunk_at<B, V>(g, b, row0);
    const ActBlock* x[T];
    I lo[T], hi[T];
    for (int t = 0; t < T; ++t) {
      x[t] = &a[t * nb + b];
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
    for (int t = 0; t < T; ++t) {
      const F xd = V::each_float(x[t]->d);
      acc[t] = V::fma(V::to_float(lo[t]), V::mul(k.d, xd), acc[t]);
      if constexpr (kHalves) acc[t] = V::fma(V::to_float(hi[t]), V::mul(k.d_hi, xd), acc[t]);
      if constexpr (kOffset<B> != Offset::None) off[t] = V::fma(k.off, V::each_float(x[t]->s), off[t]);
    }
  }
  for (int t = 0; t < T; ++t) V::store(y + t * n_out + row0, V::add(acc[t], off[t]), rows);
}

#if defined(__AMX_INT8__)
// AMX: one tile instruction multiplies a chunk of sixteen tokens' activations (a 16 x 32-byte
// tile) by the same chunk of sixteen rows (an 8 x 64-byte tile: row v holds elements 4 v .. 4 v + 3
// of each row, which is what a quad's code vector already is) into 16 x 16 exact int32 sums. Those
// are group_tile's integer sums, so the fmas that follow, the same as there, give the same bits.
// The products cost little; what costs is moving each chunk's 1 KB of sums out of the tile unit
// and the float work on them, per chunk as in group_tile. Tiles neither forward to vector loads
// nor from vector stores: a group's codes are unpacked for all chunks before the first tile reads
// them, and the activations are copied once into tiles of their own (act_tiles).
namespace amx {

constexpr int kTokens = 16;
// Tokens whose tiles pass each group's unpacked codes (twice the vector path's block: their
// activation tiles, 1.3 MB at k = 8,192, still fit a core's L2).
constexpr int64_t kTokenBlock = 128;
// Tile registers: 0-3 sums (a batch of four products), 4-5 activations, 6-7 codes.

// Q6_K scales each 16-element half apart: its tiles hold halves (a batch is one chunk).
template <class B>
constexpr int kHalves = std::is_same_v<B, BlockQ6_K> ? 2 : 1;

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
  explicit TileConfig(int halves) {
    for (int i = 0; i < 8; ++i) rows[i] = kTokens, bytes_per_row[i] = 64;
    for (int i : {4, 5}) bytes_per_row[i] = uint16_t(32 / halves);
    for (int i : {6, 7}) rows[i] = uint8_t(8 / halves);
  }
};

// This thread's tile registers configured for format B for the scope (and handed back, so that a
// context switch need not save their 8 KB).
class Tiles {
 public:
  explicit Tiles(int halves) {
    static const TileConfig whole(1), halved(2);
    _tile_loadconfig(halves == 1 ? &whole : &halved);
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

// A chunk of sixteen tokens' activations: the codes as a tile (rows 32 bytes apart, in 8 whole
// cache lines) and each token's d and s (ActBlock's).
struct alignas(64) ActTile {
  int8_t q[kTokens][32];
  float d[kTokens], s[kTokens];
};

// The activations of each whole sixteen tokens of a, [tile][chunk], in a buffer of the calling
// thread.
inline const ActTile* act_tiles(const ActBlock* a, int64_t num_tokens, int64_t nb) {
  thread_local std::vector<ActTile> tiles;
  tiles.resize(size_t(num_tokens / kTokens * nb));
  ActTile* out = tiles.data();  // (the workers' own thread_local would be another buffer)
  parallel_for(int64_t(tiles.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ActTile& tile = out[i];
      const ActBlock* first = a + i / nb * kTokens * nb + i % nb;
      for (int t = 0; t < kTokens; ++t) {
        const ActBlock& ab = first[t * nb];
        std::memcpy(tile.q[t], ab.q, sizeof(tile.q[t]));
        tile.d[t] = ab.d;
        tile.s[t] = ab.s;
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

// Product i (0-3) of a batch: chunk b + i / halves, half i % halves, into tile i from activations
// in tile 4 + i % 2 and codes in tile 6 + i % 2 (the intrinsics take tile numbers as literals).
#define FLASHSERVE_TILE_PRODUCT(c, a, w)               \
  _tile_loadd(a, x.q[0] + 16 * half, 32);              \
  _tile_loadd(w, codes.row[4 * half], 64);             \
  _tile_zero(c);                                       \
  if constexpr (kSignedTile<B>) _tile_dpbssd(c, a, w); \
  else _tile_dpbsud(c, a, w);
template <class B, int i>
void multiply(const ActTile& x, const CodeTile& codes) {
  constexpr int half = i % kHalves<B>;
  if constexpr (i == 0) { FLASHSERVE_TILE_PRODUCT(0, 4, 6) }
  if constexpr (i == 1) { FLASHSERVE_TILE_PRODUCT(1, 5, 7) }
  if constexpr (i == 2) { FLASHSERVE_TILE_PRODUCT(2, 4, 6) }
  if constexpr (i == 3) { FLASHSERVE_TILE_PRODUCT(3, 5, 7) }
}
#undef FLASHSERVE_TILE_PRODUCT

// A batch: four products (four chunks, or Q6_K's two halves of two) from chunk b on, their sums
// stored in product order. (Issuing the next batch's products before reading these back, so the
// tile unit works while the fmas run, measured no faster.)
constexpr int kProducts = 4;
template <class B>
constexpr int kChunksPerBatch = kProducts / kHalves<B>;
using BatchSums = int32_t[kProducts][kTokens][16];

template <class B>
void multiply_batch(const ActTile* x, const CodeTile* codes, int64_t b, int64_t nb, BatchSums& sums) {
  const int products = int(std::min<int64_t>(kChunksPerBatch<B>, nb - b)) * kHalves<B>;
  multiply<B, 0>(x[b], codes[b]);
  if (products > 1) multiply<B, 1>(x[b + 1 / kHalves<B>], codes[b + 1 / kHalves<B>]);
  if (products > 2) multiply<B, 2>(x[b + 2 / kHalves<B>], codes[b + 2 / kHalves<B>]);
  if (products > 3) multiply<B, 3>(x[b + 3 / kHalves<B>], codes[b + 3 / kHalves<B>]);
  _tile_stored(0, sums[0], 64);
  if (products > 1) _tile_stored(1, sums[1], 64);
  if (products > 2) _tile_stored(2, sums[2], 64);
  if (products > 3) _tile_stored(3, sums[3], 64);
}

// Sixteen tokens (their nb chunks in x) against all sixteen rows of group g (the first `rows`
// stored), whose codes are unpacked in `codes`.
template <class B>
void group_tile(const uint8_t* g, const CodeTile* codes, const ActTile* x, int64_t nb, float* y, int64_t n_out,
                int rows) {
  constexpr int kChunks = kChunksPerBatch<B>;
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
  for (int64_t b0 = 0; b0 < nb; b0 += kChunks) {
    multiply_batch<B>(x, codes, b0, nb, sums);
    for (int c = 0; c < kChunks && b0 + c < nb; ++c) {
      const Chunk<Zmm> k = chunk_at<B, Zmm>(g, b0 + c, 0);
      if constexpr (kOffset<B> != Offset::None) offsets[size_t(b0 + c)].v = k.off;
      for (int t = 0; t < kTokens; ++t) {
        const __m512 xd = Zmm::each_float(x[b0 + c].d[t]);
        acc[t] = Zmm::fma(Zmm::to_float(_mm512_load_si512(sums[c * kHalves<B>][t])), Zmm::mul(k.d, xd), acc[t]);
        if constexpr (kHalves<B> == 2) {
          acc[t] = Zmm::fma(Zmm::to_float(_mm512_load_si512(sums[c * 2 + 1][t])), Zmm::mul(k.d_hi, xd), acc[t]);
        }
      }
    }
  }
// The offsets in a second pass, in the same order as group_tile's (which keeps them apart too).
  __m512 off[kTokens];
  for (int t = 0; t < kTokens; ++t) off[t] = Zmm::zero();
  if constexpr (kOffset<B> != Offset::None) {
    for (int64_t b = 0; b < nb; ++b) {
      for (int t = 0; t < kTokens; ++t) off[t] = Zmm::fma(offsets[size_t(b)].v, Zmm::each_float(x[b].s[t]), off[t]);
    }
  }
  for (int t = 0; t < kTokens; ++t) Zmm::store(y + t * n_out, Zmm::add(acc[t], off[t]), rows);
}

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

// Row r's code for element e of a chunk whose codes (and fifth bits, or Q6_K's high bits) are
// there: the value it stands for, less Q4_0's 8 and the minimums of Q4_1, Q5_1 and the K-quants.
template <class B>
int code_at(const uint8_t* codes, const uint8_t* highs, int r, int e) {
  if constexpr (std::is_same_v<B, BlockQ8_0>) return int8_t(codes[q8_packed::code_byte(r, e)]);
  const uint8_t byte = codes[q8_packed::nibble_byte(r, e)];
  int code = e < 16 ? byte & 0x0f : byte >> 4;
  if constexpr (kFifthBit<B>) code |= ((highs[q8_packed::fifth_bit_byte(r, e)] >> q4k::high_bit(e)) & 1) << 4;
  if constexpr (std::is_same_v<B, BlockQ6_K>) code |= ((highs[q6k::high_byte(r, e)] >> q6k::high_shift(e)) & 3) << 4;
  code -= kCodeBias<B>;
  if constexpr (kLookup<B>) code = kIQ4Values[code];
  return code;
}

// Q6_K chunk b of row r against one activation block: each half's exact sum, then its own scale.
float q6k_dot_scalar(const uint8_t* g, int64_t b, int r, const ActBlock& ab, float acc) {
  const uint8_t* p = packed_block<BlockQ6_K>(g, b);
  const int c = chunk_of<BlockQ6_K>(b);
  const uint8_t* chunk = p + q6k::kChunksAt + q6k::kChunkBytes * c;
  int32_t sum[2] = {0, 0};
  for (int e = 0; e < q8::kBlock; ++e) sum[e / 16] += code_at<BlockQ6_K>(chunk, chunk + q6k::kChunkLow, r, e) * ab.q[e];
  const float d = u16_half(p + 2 * r);
  for (int half = 0; half < 2; ++half) {
    const float scale = d * float(int8_t(p[q6k::kScalesAt + kRows * (2 * c + half) + r]));
    acc = std::fma(float(sum[half]), scale * ab.d, acc);
  }
  return acc;
}

// Chunk b of row r against one activation block, into the row's sums as matmul_q8's scalar code adds.
template <class B>
void chunk_dot_scalar(const uint8_t* g, int64_t b, int r, const ActBlock& ab, float& acc, float& off) {
  const uint8_t* p = packed_block<B>(g, b);
  const int c = chunk_of<B>(b);
  float d = u16_half(p + 2 * r), min = 0.0f;
  const uint8_t* codes;
  const uint8_t* highs = nullptr;  // fifth bits
  if constexpr (kAffineK<B>) {
    d *= float(p[q4k::kScalesAt + kRows * c + r]);
    min = -(u16_half(p + q4k::kDminAt + 2 * r) * float(p[q4k::kMinsAt + kRows * c + r]));
    codes = p + q4k::kCodesAt + q4k::kChunkCodes * c;
    if constexpr (std::is_same_v<B, BlockQ5_K>) highs = p + q4k::kHighsAt + q4k::kChunkHighs * c;
  } else if constexpr (std::is_same_v<B, BlockIQ4_XS>) {
    d *= float(int8_t(p[iq4xs::kScalesAt + kRows * c + r]));
    codes = p + iq4xs::kCodesAt + iq4xs::kChunkCodes * c;
  } else {
    if constexpr (kOffset<B> == Offset::Min) min = u16_half(p + q8_packed::kMinAt<B> + 2 * r);
    codes = p + q8_packed::kCodesAt<B>;
    if constexpr (kFifthBit<B>) highs = p + q8_packed::kHighsAt<B>;
  }
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
    for (int64_t b = 0; b < nb; ++b) {
      const ActBlock& ab = a[t * nb + b];
      for (int r = 0; r < rows; ++r) {
        if constexpr (std::is_same_v<B, BlockQ6_K>) {
          acc[r] = q6k_dot_scalar(g, b, r, ab, acc[r]);
        } else {
          chunk_dot_scalar<B>(g, b, r, ab, acc[r], off[r]);
        }
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
  // Whole sixteens of tokens go by tiles, a group's codes unpacked once for a block of them.
  const int64_t tiled = num_tokens / amx::kTokens * amx::kTokens;
  const amx::ActTile* x = tiled > 0 ? amx::act_tiles(a, num_tokens, nb) : nullptr;
#else
  const int64_t tiled = 0;
#endif
  parallel_for(groups, [&](int64_t begin, int64_t end) {
#if defined(__AMX_INT8__)
    if (tiled > 0) {
      const amx::Tiles config(amx::kHalves<B>);
      for (int64_t t0 = 0; t0 < tiled; t0 += amx::kTokenBlock) {
        for (int64_t g = begin; g < end; ++g) {
          const int rows = int(std::min<int64_t>(kRows, n_out - g * kRows));
          const amx::CodeTile* codes = amx::unpack_group<B>(w + g * group_bytes, nb);
          for (int64_t t = t0; t < std::min(t0 + amx::kTokenBlock, tiled); t += amx::kTokens) {
            amx::group_tile<B>(w + g * group_bytes, codes, x + t / amx::kTokens * nb, nb, y + t * n_out + g * kRows,
                               n_out, rows);
          }
        }
      }
    }
#endif
    for (int64_t t0 = tiled; t0 < num_tokens; t0 += kTokenBlock) {
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
  const ActBlock* a = q8::quantize_rows(x, num_tokens, k);
  const auto* w = static_cast<const uint8_t*>(packed);
  switch (wtype) {
    case DType::Q4_0: return matmul_groups<BlockQ4_0>(a, num_tokens, nb, w, n_out, y);
    case DType::Q4_1: return matmul_groups<BlockQ4_1>(a, num_tokens, nb, w, n_out, y);
    case DType::Q5_0: return matmul_groups<BlockQ5_0>(a, num_tokens, nb, w, n_out, y);
    case DType::Q5_1: return matmul_groups<BlockQ5_1>(a, num_tokens, nb, w, n_out, y);
    case DType::Q8_0: return matmul_groups<BlockQ8_0>(a, num_tokens, nb, w, n_out, y);
    case DType::IQ4_NL: return matmul_groups<BlockIQ4_NL>(a, num_tokens, nb, w, n_out, y);
    case DType::IQ4_XS: return matmul_groups<BlockIQ4_XS>(a, num_tokens, nb, w, n_out, y);
    case DType::Q4_K: return matmul_groups<BlockQ4_K>(a, num_tokens, nb, w, n_out, y);
    case DType::Q5_K: return matmul_groups<BlockQ5_K>(a, num_tokens, nb, w, n_out, y);
    case DType::Q6_K: return matmul_groups<BlockQ6_K>(a, num_tokens, nb, w, n_out, y);
    default: return;
  }
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
