// matmul_q8 (kernels/matmul.h): each token's activations quantized once to 8-bit blocks, then
// integer dot products with the weight blocks. The integer part of a block's dot is exact, so every
// instruction set computes the same eight lane sums (lane i: elements 4i .. 4i+3); the floats that
// follow run in one fixed order per dot product, which keeps results bit-identical across batch
// shapes, thread counts and the scalar and AVX2 code.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/block_codec.h"
#include "kernels/cpu/matmul_tile.h"
#include "kernels/matmul.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"

namespace flashserve::kernels::FLASHSERVE_ISA {
namespace {

constexpr int kBlock = 32;

// One block of a token's activations, x ~ d * q; s = d * (sum of q), for formats with an offset.
struct ActBlock {
  float d;
  float s;
  int8_t q[kBlock];
};

// NaN becomes 0; the rest rounds to nearest even within [-127, 127] (so that negating never wraps).
int8_t quantize_value(float v) {
  if (std::isnan(v)) return 0;
  return int8_t(std::nearbyint(std::clamp(v, -127.0f, 127.0f)));
}

void quantize_block(const float* x, ActBlock& out) {
  float amax = 0.0f;
  for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
  int32_t sum = 0;
  for (int i = 0; i < kBlock; ++i) {
    out.q[i] = quantize_value(x[i] * id);
    sum += out.q[i];
  }
  out.d = d;
  out.s = d * float(sum);
}

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
inline float half(uint16_t h) { return tile::half_scale(h); }
#else
inline float half(uint16_t h) { return codec::half_to_float(h); }
#endif

// What each weight format contributes per block: its 32 codes, the scale that multiplies code x
// activation, and the factor of the activations' d * sum (a fixed offset or a minimum).
struct Q8_0Codes {
  using Block = BlockQ8_0;
  static constexpr bool kSigned = true, kOffset = false;
  static float offset(const Block&, float) { return 0.0f; }
  static int code(const Block& b, int e) { return b.qs[e]; }
};

struct Q4_0Codes {
  using Block = BlockQ4_0;
  static constexpr bool kSigned = false, kOffset = true;
  static float offset(const Block&, float scale) { return -8.0f * scale; }  // sum (u - 8) q = sum u q - 8 sum q
  static int code(const Block& b, int e) { return e < 16 ? b.qs[e] & 0x0f : b.qs[e - 16] >> 4; }
};

struct Q4_1Codes {
  using Block = BlockQ4_1;
  static constexpr bool kSigned = false, kOffset = true;
  static float offset(const Block& b, float) { return half(b.m); }
  static int code(const Block& b, int e) { return e < 16 ? b.qs[e] & 0x0f : b.qs[e - 16] >> 4; }
};

// Per dot product: eight float lanes for the even blocks and eight for the odd ones (two chains
// hide the FMA latency, and AVX-512 holds a pair of blocks in one register), the offset terms in
// block order, then this fixed reduction.
float reduce_lanes(const float (&even)[8], const float (&odd)[8], float off) {
  float l[8];
  for (int i = 0; i < 8; ++i) l[i] = even[i] + odd[i];
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])) + off;
}

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
template <class C>
inline __m256i weight_codes(const typename C::Block& b) {
  if constexpr (C::kSigned) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  } else {
    return tile::nibble_bytes(b.qs);
  }
}
#endif

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

template <class C>
inline __m512i pair_lanes(__m512i w, __m512i x) {
  if constexpr (C::kSigned) {  // |w| times x with w's sign
    const __mmask64 negative = _mm512_movepi8_mask(w);
    return lane_sums(_mm512_abs_epi8(w), _mm512_mask_sub_epi8(x, negative, _mm512_setzero_si512(), x));
  }
  return lane_sums(w, x);
}

inline __m512i pair(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
inline __m512 pair(float lo, float hi) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(lo)), _mm256_set1_ps(hi), 1);
}
inline __m256i act_codes(const ActBlock& a) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q)); }
#elif defined(FLASHSERVE_AVX2)
inline __m256i lane_sums(__m256i w_u8, __m256i x_s8) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w_u8, x_s8), _mm256_set1_epi16(1));
}

template <class C>
inline __m256i block_lanes(__m256i w, __m256i x) {
  if constexpr (C::kSigned) return lane_sums(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
  return lane_sums(w, x);
}
#endif

// y[t * n_out + r] for R weight rows from w and T tokens' activation blocks from a (nb blocks each).
template <class C, int R, int T>
void dot_tile(const char* w, size_t rb, const ActBlock* a, int64_t nb, float* y, int64_t n_out) {
  using Block = typename C::Block;
  auto block = [&](int r, int64_t b) -> const Block& { return reinterpret_cast<const Block*>(w + r * rb)[b]; };
  float off[T][R] = {};
#if defined(__AVX512BW__)
  __m512 acc[T][R];
  for (auto& per_tok : acc)
    for (__m512& v : per_tok) v = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 2) {
    const bool both = b + 1 < nb;
    const int64_t b1 = both ? b + 1 : b;  // a lone last block pairs with itself, its twin's scale 0
    __m512i wc[R];
    __m512 ws[R];
    float wo[R][2];
    for (int r = 0; r < R; ++r) {
      wc[r] = pair(weight_codes<C>(block(r, b)), weight_codes<C>(block(r, b1)));
      const float s0 = half(block(r, b).d), s1 = both ? half(block(r, b1).d) : 0.0f;
      ws[r] = pair(s0, s1);
      if constexpr (C::kOffset) {
        wo[r][0] = C::offset(block(r, b), s0);
        wo[r][1] = C::offset(block(r, b1), s1);
      }
    }
    for (int t = 0; t < T; ++t) {
      const ActBlock &a0 = a[t * nb + b], &a1 = a[t * nb + b1];
      const __m512i xq = pair(act_codes(a0), act_codes(a1));
      const __m512 xd = pair(a0.d, a1.d);
      for (int r = 0; r < R; ++r) {
        // ws * xd per lane is the scalar product of the two scales, rounded once, as in the contract.
        acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair_lanes<C>(wc[r], xq)), _mm512_mul_ps(ws[r], xd), acc[t][r]);
        if constexpr (C::kOffset) {
          off[t][r] = std::fma(wo[r][0], a0.s, off[t][r]);
          if (both) off[t][r] = std::fma(wo[r][1], a1.s, off[t][r]);
        }
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
    float ws[R];
    for (int r = 0; r < R; ++r) {
      wc[r] = weight_codes<C>(block(r, b));
      ws[r] = half(block(r, b).d);
    }
    for (int t = 0; t < T; ++t) {
      const ActBlock& ab = a[t * nb + b];
      const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.q));
      for (int r = 0; r < R; ++r) {
        __m256& lanes = acc[t][r][b % 2];
        lanes = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_lanes<C>(wc[r], xq)), _mm256_set1_ps(ws[r] * ab.d), lanes);
        if constexpr (C::kOffset) off[t][r] = std::fma(C::offset(block(r, b), ws[r]), ab.s, off[t][r]);
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
      const float ws = half(blk.d);
      for (int t = 0; t < T; ++t) {
        const ActBlock& ab = a[t * nb + b];
        const float s = ws * ab.d;
        for (int i = 0; i < 8; ++i) {
          int32_t lane = 0;
          for (int e = 4 * i; e < 4 * i + 4; ++e) lane += C::code(blk, e) * ab.q[e];
          acc[t][r][b % 2][i] = std::fma(float(lane), s, acc[t][r][b % 2][i]);
        }
        if constexpr (C::kOffset) off[t][r] = std::fma(C::offset(blk, ws), ab.s, off[t][r]);
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
    for (int64_t g = begin; g < end; ++g) row_group<C, R>(w + g * R * rb, rb, a, num_tokens, nb, y + g * R, n_out);
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

void matmul_q8(const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype, int64_t n_out, float* y) {
  if (!matmul_q8_supports(wtype)) {
    throw_invalid_argument("matmul_q8: no integer dot product for %s", dtype_name(wtype).data());
  }
  if (k % kBlock != 0) throw_invalid_argument("matmul_q8: k=%lld is not whole blocks of 32", (long long)k);
  if (num_tokens <= 0 || n_out <= 0) return;
  const int64_t nb = k / kBlock;
  // Reused across calls: a step's matmuls all fit the largest one's activations.
  thread_local std::vector<ActBlock> act;
  act.resize(size_t(num_tokens * nb));
  ActBlock* a = act.data();
  parallel_for(
      num_tokens * nb,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) quantize_block(x + i * kBlock, a[i]);
      },
      num_tokens * k >= (1 << 16));
  const auto* wb = static_cast<const char*>(w);
  const size_t rb = row_bytes(wtype, k);
  switch (wtype) {
    case DType::Q8_0: return matmul_codes<Q8_0Codes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q4_0: return matmul_codes<Q4_0Codes>(a, num_tokens, nb, wb, rb, n_out, y);
    case DType::Q4_1: return matmul_codes<Q4_1Codes>(a, num_tokens, nb, wb, rb, n_out, y);
    default: return;
  }
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
