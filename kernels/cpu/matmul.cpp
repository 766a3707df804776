#include "kernels/matmul.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/block_codec.h"
#include "kernels/cpu/simd.h"

// Batch invariance comes from one rule: the dot product of token t with weight row o is always
// accumulated in the same per-lane order -- block by block, vector i of a block into accumulator
// i % kAcc, then the accumulators summed and reduced the same way. Tiles of several rows and tokens
// only interleave independent dot products (to reuse a decoded weight block across tokens and to hide
// FMA latency), so tile shapes, token counts and thread counts never change a result bit.

namespace flashserve::kernels {
namespace {

using namespace simd;

constexpr int kBlock = 32;
constexpr int kVecs = kBlock / W;  // vectors per 32-element block

// Tile shapes: rows of W decoded together, tokens sharing each decoded block. Sized so the
// R * T * kAcc accumulators, R * kVecs decoded weights and an x vector fit the register file
// (32 zmm / 16 ymm); with AVX-512 four rows in flight hide FMA latency without a second accumulator.
#if defined(FLASHSERVE_AVX512)
constexpr int kAcc = 1, kRowsSingle = 4, kRowsBatch = 4, kTokens = 4;
#elif defined(FLASHSERVE_AVX2)
constexpr int kAcc = 2, kRowsSingle = 2, kRowsBatch = 1, kTokens = 4;
#else
constexpr int kAcc = 4, kRowsSingle = 1, kRowsBatch = 1, kTokens = 4;
#endif

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
inline float half_scale(uint16_t h) { return _cvtsh_ss(h); }

// 16 bytes of packed nibbles -> q values 0..15 as floats: low nibbles are elements 0..15, high 16..31.
inline void unpack_nibbles(const uint8_t* qs, V* w) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
#if defined(FLASHSERVE_AVX512)
  // Widen once, then split nibbles per 32-bit lane: one cross-lane shuffle instead of two.
  const __m512i wide = _mm512_cvtepu8_epi32(bytes);
  w[0] = _mm512_cvtepi32_ps(_mm512_and_si512(wide, _mm512_set1_epi32(0x0f)));
  w[1] = _mm512_cvtepi32_ps(_mm512_srli_epi32(wide, 4));
#else
  const __m128i mask = _mm_set1_epi8(0x0f);
  const __m128i lo = _mm_and_si128(bytes, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
  w[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
  w[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
  w[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
  w[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
#endif
}
#endif

// Weight decoders: `decode` expands the 32 elements at p into kVecs vectors. The values equal
// dequantize_row's bit for bit (same formulas, FMA where the scalar codec fuses too).
struct F32W {
  static constexpr bool kQuantized = false;
  static constexpr size_t kBytes = kBlock * 4;
  static float elem(const char* p, int i) { float f; std::memcpy(&f, p + 4 * i, 4); return f; }
  static void decode(const char* p, V* w) {
    for (int i = 0; i < kVecs; ++i) w[i] = load(reinterpret_cast<const float*>(p) + i * W);
  }
};

struct F16W {
  static constexpr bool kQuantized = false;
  static constexpr size_t kBytes = kBlock * 2;
  static float elem(const char* p, int i) {
    uint16_t h; std::memcpy(&h, p + 2 * i, 2); return codec::half_to_float(h);
  }
  static void decode(const char* p, V* w) {
    for (int i = 0; i < kVecs; ++i) {
#if defined(FLASHSERVE_AVX512)
      w[i] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * W * i)));
#elif defined(FLASHSERVE_AVX2)
      w[i] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * W * i)));
#else
      w[i] = elem(p, i);
#endif
    }
  }
};

struct BF16W {
  static constexpr bool kQuantized = false;
  static constexpr size_t kBytes = kBlock * 2;
  static float elem(const char* p, int i) {
    uint16_t h; std::memcpy(&h, p + 2 * i, 2); return codec::bf16_to_float(h);
  }
  static void decode(const char* p, V* w) {
    for (int i = 0; i < kVecs; ++i) {
#if defined(FLASHSERVE_AVX512)
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * W * i));
      w[i] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
#elif defined(FLASHSERVE_AVX2)
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * W * i));
      w[i] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
#else
      w[i] = elem(p, i);
#endif
    }
  }
};

struct Q8_0W {
  static constexpr bool kQuantized = true;
  static constexpr size_t kBytes = sizeof(BlockQ8_0);
  static void decode(const char* p, V* w) {
    const auto& b = *reinterpret_cast<const BlockQ8_0*>(p);
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
    const V d = set1(half_scale(b.d));
    for (int i = 0; i < kVecs; ++i) {
#if defined(FLASHSERVE_AVX512)
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + W * i));
      w[i] = mul(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
#else
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + W * i));
      w[i] = mul(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
#endif
    }
#else
    codec::decode_block(b, w);
#endif
  }
};

struct Q4_0W {
  static constexpr bool kQuantized = true;
  static constexpr size_t kBytes = sizeof(BlockQ4_0);
  static void decode(const char* p, V* w) {
    const auto& b = *reinterpret_cast<const BlockQ4_0*>(p);
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
    // d * q - 8d rounds once, exactly like (q - 8) * d: -8d is exact.
    const float d = half_scale(b.d);
    unpack_nibbles(b.qs, w);
    for (int i = 0; i < kVecs; ++i) w[i] = fma(w[i], set1(d), set1(-8.0f * d));
#else
    codec::decode_block(b, w);
#endif
  }
};

struct Q4_1W {
  static constexpr bool kQuantized = true;
  static constexpr size_t kBytes = sizeof(BlockQ4_1);
  static void decode(const char* p, V* w) {
    const auto& b = *reinterpret_cast<const BlockQ4_1*>(p);
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
    const V d = set1(half_scale(b.d));
    const V m = set1(half_scale(b.m));
    unpack_nibbles(b.qs, w);
    for (int i = 0; i < kVecs; ++i) w[i] = fma(w[i], d, m);
#else
    codec::decode_block(b, w);
#endif
  }
};

// The last k % 32 elements of a float-typed row, zero-padded so they run through the same FMAs.
template <class D>
void decode_tail(const char* p, int n, V* w) {
  alignas(64) float tmp[kBlock] = {};
  for (int i = 0; i < n; ++i) tmp[i] = D::elem(p, i);
  for (int i = 0; i < kVecs; ++i) w[i] = load(tmp + i * W);
}

// y[t * n_out + r] = x[t] . W[r] for R rows starting at w and T tokens starting at x.
template <class D, int R, int T>
void dot_tile(const char* w, size_t rb, const float* x, int64_t k, float* y, int64_t n_out) {
  V acc[T][R][kAcc];
  for (auto& per_tok : acc)
    for (auto& per_row : per_tok)
      for (V& a : per_row) a = zero();

  auto accumulate = [&](const V (&wv)[R][kVecs], int64_t off, int valid) {
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < kVecs; ++i) {
        const float* xp = x + t * k + off + i * W;
        const V xv = valid == kBlock ? load(xp) : load_partial(xp, valid - i * W);
        for (int r = 0; r < R; ++r) acc[t][r][i % kAcc] = fma(xv, wv[r][i], acc[t][r][i % kAcc]);
      }
    }
  };

  const int64_t nb = k / kBlock;
  for (int64_t b = 0; b < nb; ++b) {
    V wv[R][kVecs];
    for (int r = 0; r < R; ++r) D::decode(w + r * rb + b * D::kBytes, wv[r]);
    accumulate(wv, b * kBlock, kBlock);
  }
  if constexpr (!D::kQuantized) {
    if (const int tail = int(k - nb * kBlock); tail > 0) {
      V wv[R][kVecs];
      for (int r = 0; r < R; ++r) decode_tail<D>(w + r * rb + nb * D::kBytes, tail, wv[r]);
      accumulate(wv, nb * kBlock, tail);
    }
  }

  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) {
      V sum = acc[t][r][0];
      for (int a = 1; a < kAcc; ++a) sum = add(sum, acc[t][r][a]);
      y[t * n_out + r] = reduce_add(sum);
    }
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

// Threads take contiguous runs of R-row groups (schedule(static)); the < R leftover rows follow.
template <class D, int R>
void matmul_rows(const float* x, int64_t num_tokens, int64_t k, const char* w, size_t rb,
                 int64_t n_out, float* y) {
  const int64_t groups = n_out / R;
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g)
    row_group<D, R>(w + g * R * rb, rb, x, num_tokens, k, y + g * R, n_out);
  for (int64_t o = groups * R; o < n_out; ++o)
    row_group<D, 1>(w + o * rb, rb, x, num_tokens, k, y + o, n_out);
}

template <class D>
void matmul_typed(const float* x, int64_t num_tokens, int64_t k, const char* w, size_t rb,
                  int64_t n_out, float* y) {
  // One token: more rows per tile for latency hiding; several: fewer rows, more tokens per block.
  if (num_tokens == 1)
    matmul_rows<D, kRowsSingle>(x, num_tokens, k, w, rb, n_out, y);
  else
    matmul_rows<D, kRowsBatch>(x, num_tokens, k, w, rb, n_out, y);
}

void check_k(DType t, int64_t k) {
  if (k % block_elems(t) != 0)
    throw std::invalid_argument("matmul: k=" + std::to_string(k) + " is not whole blocks of " +
                                std::string(dtype_name(t)));
}

}  // namespace

void matmul(const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype,
            int64_t n_out, float* y) {
  check_k(wtype, k);
  if (num_tokens <= 0 || n_out <= 0) return;
  const auto* wb = static_cast<const char*>(w);
  const size_t rb = row_bytes(wtype, k);
  switch (wtype) {
    case DType::F32: return matmul_typed<F32W>(x, num_tokens, k, wb, rb, n_out, y);
    case DType::F16: return matmul_typed<F16W>(x, num_tokens, k, wb, rb, n_out, y);
    case DType::BF16: return matmul_typed<BF16W>(x, num_tokens, k, wb, rb, n_out, y);
    case DType::Q4_0: return matmul_typed<Q4_0W>(x, num_tokens, k, wb, rb, n_out, y);
    case DType::Q4_1: return matmul_typed<Q4_1W>(x, num_tokens, k, wb, rb, n_out, y);
    case DType::Q8_0: return matmul_typed<Q8_0W>(x, num_tokens, k, wb, rb, n_out, y);
  }
}

void get_row(const void* w, DType wtype, int64_t k, int64_t row, float* out) {
  check_k(wtype, k);
  dequantize_row(wtype, static_cast<const char*>(w) + row * row_bytes(wtype, k), out, k);
}

void get_rows(const void* w, DType wtype, int64_t k, const int32_t* ids, int64_t n, float* out) {
  // Checked once up front: nothing inside the parallel loop may throw.
  check_k(wtype, k);
#pragma omp parallel for schedule(static) if (n > 1 && n * k >= (1 << 16))
  for (int64_t i = 0; i < n; ++i) get_row(w, wtype, k, ids[i], out + i * k);
}

}  // namespace flashserve::kernels
