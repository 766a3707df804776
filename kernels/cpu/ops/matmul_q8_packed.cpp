// matmul_q8_packed (kernels/matmul.h): matmul_q8 over weights in pack_rows_for_q8's layout, eight
// rows at a time. Every chunk sum, its scale and its place in each dot's sequence of fmas are
// matmul_q8's (q8_dot.h), so the results are bit-identical; what the layout saves is work per
// block: the eight rows' sums land in one vector in row order (q8_packed_layout.h), so their
// scales are converted, multiplied by the activation scale and applied with one instruction each,
// and the codes are unpacked once for every token of a tile.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/q8_dot.h"
#include "kernels/cpu/q8_packed_layout.h"

namespace flashserve::kernels::FLASHSERVE_ISA {
namespace {

using q8::ActBlock;
using q8_packed::kRows;

// What a chunk adds besides codes times scale (matmul_q8's offsets): Q4_1 its minimum times the
// activations' sum (Q4_K and Q5_K minus dmin times the chunk's minimum), Q4_0 -8 d times it (its codes
// 0..15 stand for -8..7), Q8_0 nothing.
enum class Offset { None, Min, MinusEightD };
template <class B>
constexpr bool kAffineK = std::is_same_v<B, BlockQ4_K> || std::is_same_v<B, BlockQ5_K>;
// IQ4_NL and IQ4_XS: nibbles indexing kIQ4Values, signed codes as Q8_0's.
template <class B>
constexpr bool kLookup = std::is_same_v<B, BlockIQ4_NL> || std::is_same_v<B, BlockIQ4_XS>;
template <class B>
constexpr bool kSignedCodes = std::is_same_v<B, BlockQ8_0> || kLookup<B>;
template <class B>
constexpr Offset kOffset = kSignedCodes<B>                                        ? Offset::None
                           : std::is_same_v<B, BlockQ4_1> || kAffineK<B> ? Offset::Min
                                                                         : Offset::MinusEightD;
namespace q4k = q8_packed::q4k;
namespace q6k = q8_packed::q6k;
namespace iq4xs = q8_packed::iq4xs;

template <class B>
constexpr bool kNibbles = !std::is_same_v<B, BlockQ8_0>;

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
// One block of the group's eight rows, as every token of a tile uses it.
struct Unpacked {
  __m256 d;              // scales, row order (Q6_K: of elements 0-15)
  __m256 d_hi;           // Q6_K: the scales of elements 16-31
  __m256 off;            // Q4_1: minimums; Q4_0: -8 d
  __m256i lo[4], hi[4];  // elements 0-15 and 16-31 of rows i (low 128 bits) and i + 4; signed: |code|
  __m256i lo_sign[4], hi_sign[4];  // signed codes (kSignedCodes): the codes, whose signs the activations take
};

// Four vectors of nibbles in Q4_0's layout (codes_at) into u.lo / u.hi; with kLookup, the IQ4
// values they index, as signed codes.
template <bool kLookupValues>
void unpack_nibbles(const uint8_t* codes, Unpacked& u) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int i = 0; i < 4; ++i) {
    const __m256i z = tile::load_bytes32(codes + 32 * i);
    u.lo[i] = _mm256_and_si256(z, nibble);
    u.hi[i] = _mm256_and_si256(_mm256_srli_epi16(z, 4), nibble);
    if constexpr (kLookupValues) {
      u.lo_sign[i] = tile::iq4_lookup(u.lo[i]);
      u.hi_sign[i] = tile::iq4_lookup(u.hi[i]);
      u.lo[i] = _mm256_sign_epi8(u.lo_sign[i], u.lo_sign[i]);
      u.hi[i] = _mm256_sign_epi8(u.hi_sign[i], u.hi_sign[i]);
    }
  }
}

template <class B>
Unpacked unpack(const uint8_t* p) {
  Unpacked u;
  u.d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  u.off = _mm256_setzero_ps();
  if constexpr (kOffset<B> == Offset::Min) {
    u.off = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + q8_packed::kMinAt<B>)));
  }
  if constexpr (kOffset<B> == Offset::MinusEightD) u.off = _mm256_mul_ps(u.d, _mm256_set1_ps(-8.0f));
  const uint8_t* codes = p + q8_packed::kCodesAt<B>;
  if constexpr (kNibbles<B>) {
    unpack_nibbles<kLookup<B>>(codes, u);
  } else {
    for (int i = 0; i < 4; ++i) {
      u.lo_sign[i] = tile::load_bytes32(codes + 64 * i);
      u.hi_sign[i] = tile::load_bytes32(codes + 64 * i + 32);
      u.lo[i] = _mm256_sign_epi8(u.lo_sign[i], u.lo_sign[i]);
      u.hi[i] = _mm256_sign_epi8(u.hi_sign[i], u.hi_sign[i]);
    }
  }
  return u;
}

// IQ4_XS chunk b: d times each row's chunk scale.
Unpacked unpack_iq4xs(const uint8_t* g, int64_t b) {
  const uint8_t* p = packed_block<BlockIQ4_XS>(g, b);
  const int c = chunk_of<BlockIQ4_XS>(b);
  Unpacked u;
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m128i sc = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + iq4xs::kScalesAt + kRows * c));
  u.d = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
  u.off = _mm256_setzero_ps();
  unpack_nibbles<true>(p + iq4xs::kCodesAt + iq4xs::kChunkCodes * c, u);
  return u;
}

// Q4_K or Q5_K chunk b (of 32 elements): the scales d * sc and offsets -(dmin * m) as matmul_q8
// computes them (codec::k_affine), eight rows at once; Q5_K's codes take their fifth bit.
template <class B>
Unpacked unpack_k(const uint8_t* g, int64_t b) {
  const uint8_t* p = packed_block<B>(g, b);
  const int c = chunk_of<B>(b);
  auto bytes_as_floats = [](const uint8_t* q) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
  };
  Unpacked u;
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + q4k::kDminAt)));
  u.d = _mm256_mul_ps(d, bytes_as_floats(p + q4k::kScalesAt + kRows * c));
  u.off = _mm256_xor_ps(_mm256_mul_ps(dmin, bytes_as_floats(p + q4k::kMinsAt + kRows * c)), _mm256_set1_ps(-0.0f));
  const uint8_t* codes = p + q4k::kCodesAt + q4k::kChunkCodes * c;
  for (int i = 0; i < 4; ++i) {
    const __m256i z = tile::load_bytes32(codes + 32 * i), nibble = _mm256_set1_epi8(0x0f);
    u.lo[i] = _mm256_and_si256(z, nibble);
    u.hi[i] = _mm256_and_si256(_mm256_srli_epi16(z, 4), nibble);
  }
  if constexpr (std::is_same_v<B, BlockQ5_K>) {
    // Byte j of a row's four holds elements 8 j .. 8 j + 7: each position picks its byte, tests its bit.
    const __m256i pick_lo = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                             4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5);
    const __m256i pick_hi = _mm256_add_epi8(pick_lo, _mm256_set1_epi8(2));
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201);
    const uint8_t* highs = p + q4k::kHighsAt + q4k::kChunkHighs * c;
    auto fifth_bits = [&](__m256i v, __m256i pick) {
      const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(v, pick), bit), bit);
      return _mm256_and_si256(set, _mm256_set1_epi8(16));
    };
    for (int i = 0; i < 4; ++i) {
      const __m256i v = _mm256_broadcastsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(highs + 8 * i)));
      u.lo[i] = _mm256_or_si256(u.lo[i], fifth_bits(v, pick_lo));
      u.hi[i] = _mm256_or_si256(u.hi[i], fifth_bits(v, pick_hi));
    }
  }
  return u;
}

// Q6_K chunk b: the codes 0..63 (code - 32 is the weight's), the scales d * sc of each half.
Unpacked unpack_q6k(const uint8_t* g, int64_t b) {
  const uint8_t* p = packed_block<BlockQ6_K>(g, b);
  const int c = chunk_of<BlockQ6_K>(b);
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  auto scales = [&](int half) {
    const __m128i s = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + q6k::kScalesAt + kRows * half));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s));
  };
  Unpacked u;
  u.d = _mm256_mul_ps(d, scales(2 * c));
  u.d_hi = _mm256_mul_ps(d, scales(2 * c + 1));
  u.off = _mm256_setzero_ps();
  const uint8_t* chunk = p + q6k::kChunksAt + q6k::kChunkBytes * c;
  const __m256i nibble = _mm256_set1_epi8(0x0f), two_bits = _mm256_set1_epi8(3);
  // Each lane's 8 bytes of high bits twice: row i's in the low lane, row i + 4's in the high one.
  const __m256i twice = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7,  //
                                         8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m256i second8 = _mm256_setr_epi64x(0, -1, 0, -1);
  for (int i = 0; i < 4; ++i) {
    const __m256i z = tile::load_bytes32(chunk + 32 * i);
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(chunk + q6k::kChunkLow + 16 * i));
    const __m256i v = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(h), twice);
    // Elements 0-7 at bits 0-1, 8-15 at 2-3, 16-23 at 4-5, 24-31 at 6-7 (16-bit shifts: the bits
    // they pull in from the next byte are masked off).
    const __m256i h_lo = _mm256_and_si256(_mm256_blendv_epi8(v, _mm256_srli_epi16(v, 2), second8), two_bits);
    const __m256i h_hi = _mm256_and_si256(
        _mm256_blendv_epi8(_mm256_srli_epi16(v, 4), _mm256_srli_epi16(v, 6), second8), two_bits);
    u.lo[i] = _mm256_or_si256(_mm256_and_si256(z, nibble), _mm256_slli_epi16(h_lo, 4));
    u.hi[i] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(z, 4), nibble), _mm256_slli_epi16(h_hi, 4));
  }
  return u;
}

template <class B>
Unpacked unpack_chunk(const uint8_t* g, int64_t b) {
  if constexpr (kAffineK<B>) return unpack_k<B>(g, b);
  else if constexpr (std::is_same_v<B, BlockQ6_K>) return unpack_q6k(g, b);
  else if constexpr (std::is_same_v<B, BlockIQ4_XS>) return unpack_iq4xs(g, b);
  else return unpack<B>(packed_block<B>(g, b));
}

// Q6_K: each half's exact sum of (code - 32) x, as sum code x - sum 32 x, then its own scale.
inline __m256 q6k_dot(const Unpacked& u, __m256i x_lo, __m256i x_hi, float xd, __m256 acc) {
  const __m256i thirty_two = _mm256_set1_epi8(32);
  const __m256i m_lo = q8::lane_sums(thirty_two, x_lo), m_hi = q8::lane_sums(thirty_two, x_hi);
  __m256i lo[4], hi[4];
  for (int i = 0; i < 4; ++i) {
    lo[i] = _mm256_sub_epi32(q8::lane_sums(u.lo[i], x_lo), m_lo);
    hi[i] = _mm256_sub_epi32(q8::lane_sums(u.hi[i], x_hi), m_hi);
  }
  const __m256 xd8 = _mm256_set1_ps(xd);
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q8::quad_sums(lo[0], lo[1], lo[2], lo[3])), _mm256_mul_ps(u.d, xd8), acc);
  const __m256i hi_sums = q8::quad_sums(hi[0], hi[1], hi[2], hi[3]);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi_sums), _mm256_mul_ps(u.d_hi, xd8), acc);
}

// T tokens (t = 0 .. T-1 of a) against the group's eight rows.
template <class B, int T>
void group_tile(const uint8_t* g, const ActBlock* a, int64_t nb, float* y, int64_t n_out, int rows) {
  __m256 acc[T], off[T];
  for (int t = 0; t < T; ++t) acc[t] = off[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Unpacked u = unpack_chunk<B>(g, b);
    for (int t = 0; t < T; ++t) {
      const ActBlock& ab = a[t * nb + b];
      const __m256i x_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.q)));
      const __m256i x_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.q + 16)));
      if constexpr (std::is_same_v<B, BlockQ6_K>) {
        acc[t] = q6k_dot(u, x_lo, x_hi, ab.d, acc[t]);
        continue;
      }
      __m256i l[4];
      for (int i = 0; i < 4; ++i) {
        if constexpr (!kSignedCodes<B>) {
          l[i] = q8::nibble_lane_sums(u.lo[i], x_lo, u.hi[i], x_hi);
        } else {
          const __m256i lo = q8::lane_sums(u.lo[i], _mm256_sign_epi8(x_lo, u.lo_sign[i]));
          l[i] = q8::add_lane_sums(lo, u.hi[i], _mm256_sign_epi8(x_hi, u.hi_sign[i]));
        }
      }
      const __m256 sums = _mm256_cvtepi32_ps(q8::quad_sums(l[0], l[1], l[2], l[3]));
      acc[t] = _mm256_fmadd_ps(sums, _mm256_mul_ps(u.d, _mm256_set1_ps(ab.d)), acc[t]);
      if constexpr (kOffset<B> != Offset::None) off[t] = _mm256_fmadd_ps(u.off, _mm256_set1_ps(ab.s), off[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(32) float v[kRows];
    _mm256_store_ps(v, _mm256_add_ps(acc[t], off[t]));
    std::copy(v, v + rows, y + t * n_out);
  }
}

constexpr int kTokens = 4;
template <class B>
void group_rows(const uint8_t* g, const ActBlock* a, int64_t num_tokens, int64_t nb, float* y, int64_t n_out,
                int rows) {
  int64_t t = 0;
  for (; t + kTokens <= num_tokens; t += kTokens) group_tile<B, kTokens>(g, a + t * nb, nb, y + t * n_out, n_out, rows);
  for (; t + 2 <= num_tokens; t += 2) group_tile<B, 2>(g, a + t * nb, nb, y + t * n_out, n_out, rows);
  if (t < num_tokens) group_tile<B, 1>(g, a + t * nb, nb, y + t * n_out, n_out, rows);
}
#else
inline float u16_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return q8::half(h);
}

// Q6_K chunk b of row r against one activation block: each half's exact sum, then its own scale.
float q6k_dot_scalar(const uint8_t* g, int64_t b, int r, const ActBlock& ab, float acc) {
  const uint8_t* p = packed_block<BlockQ6_K>(g, b);
  const int c = chunk_of<BlockQ6_K>(b);
  const uint8_t* chunk = p + q6k::kChunksAt + q6k::kChunkBytes * c;
  const uint8_t* nibbles = chunk + q8_packed::code_offset<BlockQ4_0>(r, 0);
  const uint8_t* highs = chunk + q6k::kChunkLow + q6k::high_offset(r);
  int32_t sum[2] = {0, 0};
  for (int e = 0; e < q8::kBlock; ++e) {
    const int low = e < 16 ? nibbles[e] & 0x0f : nibbles[e - 16] >> 4;
    const int high = (highs[e % 8] >> (2 * (e / 8))) & 3;
    sum[e / 16] += ((low | high << 4) - 32) * ab.q[e];
  }
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
  float d, min = 0.0f;
  const uint8_t* codes;
  const uint8_t* highs = nullptr;  // Q5_K's fifth bits
  if constexpr (kAffineK<B>) {
    const uint8_t* p = packed_block<B>(g, b);
    const int c = chunk_of<B>(b);
    d = u16_half(p + 2 * r) * float(p[q4k::kScalesAt + kRows * c + r]);
    min = -(u16_half(p + q4k::kDminAt + 2 * r) * float(p[q4k::kMinsAt + kRows * c + r]));
    codes = p + q4k::kCodesAt + q4k::kChunkCodes * c;
    if constexpr (std::is_same_v<B, BlockQ5_K>) {
      highs = p + q4k::kHighsAt + q4k::kChunkHighs * c + q4k::high_offset(r);
    }
  } else if constexpr (std::is_same_v<B, BlockIQ4_XS>) {
    const uint8_t* p = packed_block<B>(g, b);
    const int c = chunk_of<B>(b);
    d = u16_half(p + 2 * r) * float(int8_t(p[iq4xs::kScalesAt + kRows * c + r]));
    codes = p + iq4xs::kCodesAt + iq4xs::kChunkCodes * c;
  } else {
    const uint8_t* p = packed_block<B>(g, b);
    d = u16_half(p + 2 * r);
    if constexpr (kOffset<B> == Offset::Min) min = u16_half(p + q8_packed::kMinAt<B> + 2 * r);
    codes = p + q8_packed::kCodesAt<B>;
  }
  int32_t sum = 0;
  for (int e = 0; e < q8::kBlock; ++e) {
    int code;
    if constexpr (kNibbles<B>) {
      const uint8_t byte = codes[q8_packed::code_offset<BlockQ4_0>(r, 0) + e % 16];
      code = e < 16 ? byte & 0x0f : byte >> 4;
      if constexpr (std::is_same_v<B, BlockQ5_K>) code |= ((highs[e / 8] >> (e % 8)) & 1) << 4;
      if constexpr (kLookup<B>) code = kIQ4Values[code];
    } else {
      code = int8_t(codes[q8_packed::code_offset<B>(r, e / 16) + e % 16]);
    }
    sum += code * ab.q[e];
  }
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

// Threads take contiguous runs of groups and prefetch 16 rows ahead, as matmul_q8 does (four groups
// of four rows there).
constexpr int64_t kPrefetchGroups = 2;
template <class B>
void matmul_groups(const ActBlock* a, int64_t num_tokens, int64_t nb, const uint8_t* w, int64_t n_out, float* y) {
  const int64_t groups = (n_out + kRows - 1) / kRows;
  const size_t group_bytes = size_t(nb / q8_packed::kChunksPerBlock<B>) * q8_packed::kPackedBlockBytes<B>;
  parallel_for(groups, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      if (g + kPrefetchGroups < end) {
        tile::prefetch_rows(reinterpret_cast<const char*>(w + (g + kPrefetchGroups) * group_bytes), group_bytes);
      }
      const int rows = int(std::min<int64_t>(kRows, n_out - g * kRows));
      group_rows<B>(w + g * group_bytes, a, num_tokens, nb, y + g * kRows, n_out, rows);
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
