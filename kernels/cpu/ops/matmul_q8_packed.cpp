// matmul_q8_packed (kernels/matmul.h): matmul_q8 over weights in pack_rows_for_q8's layout, eight
// rows at a time. Every lane sum, its scale and its place in the fixed reduction are matmul_q8's
// (q8_dot.h), so the results are bit-identical; what the layout saves is work per block: the eight
// rows' scales are converted and multiplied by the activation scale in one instruction each, their
// offset terms accumulate eight rows at once, and each code vector holds several rows (AVX-512: the
// low or high nibbles of four rows), where matmul_q8 spends those instructions per row.
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
// activations' sum, Q4_0 -8 d times it (its codes 0..15 stand for -8..7), Q8_0 nothing.
enum class Offset { None, Min, MinusEightD };
template <class B>
constexpr Offset kOffset = std::is_same_v<B, BlockQ8_0> ? Offset::None
                           : std::is_same_v<B, BlockQ4_1> ? Offset::Min
                                                          : Offset::MinusEightD;
template <class B>
constexpr bool kNibbles = !std::is_same_v<B, BlockQ8_0>;

template <class B>
const uint8_t* group_block(const uint8_t* g, int64_t b) {
  return g + size_t(b) * q8_packed::kGroupBlock<B>;
}

// Which row slot l of code vector v holds, where a vector is `width` int32 slots wide (each slot one
// of matmul_q8's lanes: elements 4 i .. 4 i + 3 of a chunk). Nibble formats: a vector holds the low
// (v even: lanes 0-3) or high (v odd: lanes 4-7) nibbles of width / 4 rows; Q8_0: all eight lanes of
// width / 8 rows.
template <class B>
constexpr int row_of(int v, int l, int width) {
  if constexpr (kNibbles<B>) return (v / 2) * (width / 4) + l / 4;
  return v * (width / 8) + l / 8;
}

// The vector code reduces q8::reduce_lanes' way, the same additions on the same pairs: the even and
// odd accumulators added, then lane i plus lane i + 4, then within each 128-bit lane slots 0 + 2 and
// 1 + 3, then those two. A row's sum lands in slot 0 of a 128-bit lane; this picks it: vector v of
// Width slots, after the nibble formats' pairing of vectors 2q and 2q + 1 into 2q.
template <class B, int V, int Width>
float row_sum(const float (&sums)[V][Width], int r) {
  if constexpr (kNibbles<B>) return sums[2 * (r / (Width / 4))][4 * (r % (Width / 4))];
  return sums[r / (Width / 8)][8 * (r % (Width / 8))];
}

#if defined(FLASHSERVE_AVX512)
inline __m512 in_lane_sums(__m512 l) {
  const __m512 q = _mm512_add_ps(l, _mm512_permute_ps(l, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm512_add_ps(q, _mm512_permute_ps(q, _MM_SHUFFLE(2, 3, 0, 1)));
}

// Slot l of vector v takes the scale product of row_of(v, l).
template <class B>
__m512i scale_index(int v) {
  alignas(64) int32_t idx[16];
  for (int l = 0; l < 16; ++l) idx[l] = row_of<B>(v, l, 16);
  return _mm512_load_si512(idx);
}

// T tokens (t = 0 .. T-1 of a) against the group's eight rows.
template <class B, int T>
void group_tile(const uint8_t* g, const ActBlock* a, int64_t nb, float* y, int64_t n_out, int rows) {
  constexpr int V = 4;
  __m512 acc[T][2][V];
  __m256 off[T];
  for (int t = 0; t < T; ++t) {
    off[t] = _mm256_setzero_ps();
    for (auto& per_parity : acc[t])
      for (__m512& v : per_parity) v = _mm512_setzero_ps();
  }
  const __m512i index[V] = {scale_index<B>(0), scale_index<B>(1), scale_index<B>(2), scale_index<B>(3)};
  auto step = [&](int64_t b, int parity) {
    const uint8_t* p = group_block<B>(g, b);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    __m256 o = _mm256_setzero_ps();
    if constexpr (kOffset<B> == Offset::Min) {
      o = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + q8_packed::kMinAt<B>)));
    }
    if constexpr (kOffset<B> == Offset::MinusEightD) o = _mm256_mul_ps(d, _mm256_set1_ps(-8.0f));
    const uint8_t* codes = p + q8_packed::kCodesAt<B>;
    __m512i c[V];
    if constexpr (kNibbles<B>) {
      const __m512i nibble = _mm512_set1_epi8(0x0f);
      for (int h = 0; h < 2; ++h) {
        const __m512i z = _mm512_loadu_si512(codes + 64 * h);
        c[2 * h] = _mm512_and_si512(z, nibble);
        c[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(z, 4), nibble);
      }
    } else {
      for (int v = 0; v < V; ++v) c[v] = _mm512_loadu_si512(codes + 64 * v);
    }
    for (int t = 0; t < T; ++t) {
      const ActBlock& ab = a[t * nb + b];
      const __m512 dd = _mm512_castps256_ps512(_mm256_mul_ps(d, _mm256_set1_ps(ab.d)));
      for (int v = 0; v < V; ++v) {
        __m512i sums;
        if constexpr (kNibbles<B>) {
          const __m512i x = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.q + 16 * (v % 2))));
          sums = q8::lane_sums(c[v], x);
        } else {
          sums = q8::signed_lane_sums(c[v], _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.q))));
        }
        acc[t][parity][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_permutexvar_ps(index[v], dd), acc[t][parity][v]);
      }
      if constexpr (kOffset<B> != Offset::None) off[t] = _mm256_fmadd_ps(o, _mm256_set1_ps(ab.s), off[t]);
    }
  };
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    step(b, 0);
    step(b + 1, 1);
  }
  if (b < nb) step(b, 0);
  for (int t = 0; t < T; ++t) {
    __m512 reduced[V];
    for (int v = 0; v < V; ++v) reduced[v] = _mm512_add_ps(acc[t][0][v], acc[t][1][v]);
    alignas(64) float sums[V][16], offs[8];
    for (int v = 0; v < V; ++v) {
      __m512 l;
      if constexpr (kNibbles<B>) {  // vectors 2q and 2q+1 hold lanes 0-3 and 4-7 of the same rows
        if (v % 2) continue;
        l = _mm512_add_ps(reduced[v], reduced[v + 1]);
      } else {  // lanes 0-3 and 4-7 of a row sit in neighbouring 128-bit lanes
        l = _mm512_add_ps(reduced[v], _mm512_shuffle_f32x4(reduced[v], reduced[v], _MM_SHUFFLE(2, 3, 0, 1)));
      }
      _mm512_store_ps(sums[v], in_lane_sums(l));
    }
    _mm256_store_ps(offs, off[t]);
    for (int r = 0; r < rows; ++r) y[t * n_out + r] = row_sum<B>(sums, r) + offs[r];
  }
}

template <class B>
void group_rows(const uint8_t* g, const ActBlock* a, int64_t num_tokens, int64_t nb, float* y, int64_t n_out,
                int rows) {
  int64_t t = 0;
  for (; t + 2 <= num_tokens; t += 2) group_tile<B, 2>(g, a + t * nb, nb, y + t * n_out, n_out, rows);
  if (t < num_tokens) group_tile<B, 1>(g, a + t * nb, nb, y + t * n_out, n_out, rows);
}
#elif defined(FLASHSERVE_AVX2)
inline __m256 in_lane_sums(__m256 l) {
  const __m256 q = _mm256_add_ps(l, _mm256_permute_ps(l, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm256_add_ps(q, _mm256_permute_ps(q, _MM_SHUFFLE(2, 3, 0, 1)));
}

// Sixteen ymm registers hold one token's accumulators for four rows, so a group is two passes.
template <class B>
__m256i scale_index(int v) {
  alignas(32) int32_t idx[8];
  for (int l = 0; l < 8; ++l) idx[l] = row_of<B>(v, l, 8);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(idx));
}

// One token against rows [4 half, 4 half + 4) of the group.
template <class B>
void half_group(const uint8_t* g, int half, const ActBlock* a, int64_t nb, float* y, int rows) {
  constexpr int V = 4;
  __m256 acc[2][V];
  for (auto& per_parity : acc)
    for (__m256& v : per_parity) v = _mm256_setzero_ps();
  __m128 off = _mm_setzero_ps();
  const __m256i index[V] = {scale_index<B>(0), scale_index<B>(1), scale_index<B>(2), scale_index<B>(3)};
  auto step = [&](int64_t b, int parity) {
    const uint8_t* p = group_block<B>(g, b);
    const ActBlock& ab = a[b];
    const __m128 d = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * half)));
    const __m256 dd = _mm256_castps128_ps256(_mm_mul_ps(d, _mm_set1_ps(ab.d)));
    const uint8_t* codes = p + q8_packed::kCodesAt<B> + 4 * half * q8_packed::Layout<B>::kCodeBytes;
    for (int v = 0; v < V; ++v) {
      __m256i sums;
      if constexpr (kNibbles<B>) {
        const __m256i z = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32 * (v / 2)));
        const __m256i c = _mm256_and_si256(v % 2 ? _mm256_srli_epi16(z, 4) : z, _mm256_set1_epi8(0x0f));
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.q + 16 * (v % 2)));
        sums = q8::lane_sums(c, _mm256_broadcastsi128_si256(x));
      } else {
        const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32 * v));
        sums = q8::signed_lane_sums(c, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.q)));
      }
      acc[parity][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_permutevar8x32_ps(dd, index[v]), acc[parity][v]);
    }
    if constexpr (kOffset<B> != Offset::None) {
      __m128 o;
      if constexpr (kOffset<B> == Offset::Min) {
        o = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + q8_packed::kMinAt<B> + 8 * half)));
      } else {
        o = _mm_mul_ps(d, _mm_set1_ps(-8.0f));
      }
      off = _mm_fmadd_ps(o, _mm_set1_ps(ab.s), off);
    }
  };
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    step(b, 0);
    step(b + 1, 1);
  }
  if (b < nb) step(b, 0);
  __m256 reduced[V];
  for (int v = 0; v < V; ++v) reduced[v] = _mm256_add_ps(acc[0][v], acc[1][v]);
  alignas(32) float sums[V][8], offs[4];
  for (int v = 0; v < V; ++v) {
    __m256 l;
    if constexpr (kNibbles<B>) {
      if (v % 2) continue;
      l = _mm256_add_ps(reduced[v], reduced[v + 1]);
    } else {
      l = _mm256_add_ps(reduced[v], _mm256_permute2f128_ps(reduced[v], reduced[v], 1));
    }
    _mm256_store_ps(sums[v], in_lane_sums(l));
  }
  _mm_store_ps(offs, off);
  for (int r = 0; r < rows; ++r) y[r] = row_sum<B>(sums, r) + offs[r];
}

template <class B>
void group_rows(const uint8_t* g, const ActBlock* a, int64_t num_tokens, int64_t nb, float* y, int64_t n_out,
                int rows) {
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int half = 0; half < 2 && 4 * half < rows; ++half) {
      half_group<B>(g, half, a + t * nb, nb, y + t * n_out + 4 * half, std::min(rows - 4 * half, 4));
    }
  }
}
#else
template <class B>
void group_rows(const uint8_t* g, const ActBlock* a, int64_t num_tokens, int64_t nb, float* y, int64_t n_out,
                int rows) {
  using L = q8_packed::Layout<B>;
  auto u16 = [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return h;
  };
  for (int64_t t = 0; t < num_tokens; ++t) {
    float acc[kRows][2][8] = {}, off[kRows] = {};
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = group_block<B>(g, b);
      const ActBlock& ab = a[t * nb + b];
      for (int r = 0; r < rows; ++r) {
        const float d = q8::half(u16(p + 2 * r));
        const uint8_t* qs = p + q8_packed::kCodesAt<B> + r * L::kCodeBytes;
        for (int i = 0; i < 8; ++i) {
          int32_t lane = 0;
          for (int e = 4 * i; e < 4 * i + 4; ++e) {
            const int code = kNibbles<B> ? (e < 16 ? qs[e] & 0x0f : qs[e - 16] >> 4) : int(int8_t(qs[e]));
            lane += code * ab.q[e];
          }
          acc[r][b % 2][i] = std::fma(float(lane), d * ab.d, acc[r][b % 2][i]);
        }
        if constexpr (kOffset<B> == Offset::Min) off[r] = std::fma(q8::half(u16(p + q8_packed::kMinAt<B> + 2 * r)), ab.s, off[r]);
        if constexpr (kOffset<B> == Offset::MinusEightD) off[r] = std::fma(-8.0f * d, ab.s, off[r]);
      }
    }
    for (int r = 0; r < rows; ++r) y[t * n_out + r] = q8::reduce_lanes(acc[r][0], acc[r][1], off[r]);
  }
}
#endif

// Threads take contiguous runs of groups and prefetch 16 rows ahead, as matmul_q8 does (four groups
// of four rows there).
constexpr int64_t kPrefetchGroups = 2;
template <class B>
void matmul_groups(const ActBlock* a, int64_t num_tokens, int64_t nb, const uint8_t* w, int64_t n_out, float* y) {
  const int64_t groups = (n_out + kRows - 1) / kRows;
  const size_t group_bytes = size_t(nb) * q8_packed::kGroupBlock<B>;
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
  if (k % 32 != 0) throw_invalid_argument("matmul_q8_packed: k=%lld is not whole blocks", (long long)k);
  if (num_tokens <= 0 || n_out <= 0) return;
  const int64_t nb = k / 32;
  const ActBlock* a = q8::quantize_rows(x, num_tokens, k);
  const auto* w = static_cast<const uint8_t*>(packed);
  switch (wtype) {
    case DType::Q4_0: return matmul_groups<BlockQ4_0>(a, num_tokens, nb, w, n_out, y);
    case DType::Q4_1: return matmul_groups<BlockQ4_1>(a, num_tokens, nb, w, n_out, y);
    case DType::Q8_0: return matmul_groups<BlockQ8_0>(a, num_tokens, nb, w, n_out, y);
    default: return;
  }
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
