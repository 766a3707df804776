#include "kernels/matmul.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"

#include <cstring>
#include <stdexcept>

#include "kernels/cpu/block_codec.h"
#include "kernels/cpu/matmul_tile.h"

namespace flashserve::kernels::FLASHSERVE_ISA {
namespace {

using namespace tile;

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
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
  auto widen8 = [](__m128i b) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)); };
  w[0] = {widen8(lo), widen8(_mm_srli_si128(lo, 8))};
  w[1] = {widen8(hi), widen8(_mm_srli_si128(hi, 8))};
#endif
}
#endif

#if !defined(FLASHSERVE_AVX512) && !defined(FLASHSERVE_AVX2)
// Portable build: the scalar codec's 32 values, as vectors.
template <class Block>
void decode_floats(const Block& b, V* w) {
  float f[kChunk];
  codec::decode_block(b, f);
  for (int i = 0; i < kVecs; ++i) w[i] = load(f + i * W);
}
#endif

// Decoders of the float types and the 32-element blocks (the interface is in matmul_tile.h). The
// values equal dequantize_row's bit for bit: same formulas, FMA where the scalar codec fuses too.
struct F32W {
  static constexpr bool kQuantized = false;
  static constexpr int kElems = kChunk;
  static constexpr size_t kBytes = kChunk * 4;
  static float elem(const char* p, int i) { float f; std::memcpy(&f, p + 4 * i, 4); return f; }
  static void decode(const char* p, int, V* w) {
    for (int i = 0; i < kVecs; ++i) w[i] = load(reinterpret_cast<const float*>(p) + i * W);
  }
};

struct F16W {
  static constexpr bool kQuantized = false;
  static constexpr int kElems = kChunk;
  static constexpr size_t kBytes = kChunk * 2;
  static float elem(const char* p, int i) {
    uint16_t h; std::memcpy(&h, p + 2 * i, 2); return codec::half_to_float(h);
  }
  static void decode(const char* p, int, V* w) {
    for (int i = 0; i < kVecs; ++i) {
#if defined(FLASHSERVE_AVX512)
      w[i] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * W * i)));
#elif defined(FLASHSERVE_AVX2)
      const auto* h = reinterpret_cast<const __m128i*>(p + 2 * W * i);
      w[i] = {_mm256_cvtph_ps(_mm_loadu_si128(h)), _mm256_cvtph_ps(_mm_loadu_si128(h + 1))};
#else
      w[i] = each([&](int j) { return elem(p, i * W + j); });
#endif
    }
  }
};

struct BF16W {
  static constexpr bool kQuantized = false;
  static constexpr int kElems = kChunk;
  static constexpr size_t kBytes = kChunk * 2;
  static float elem(const char* p, int i) {
    uint16_t h; std::memcpy(&h, p + 2 * i, 2); return codec::bf16_to_float(h);
  }
  static void decode(const char* p, int, V* w) {
    for (int i = 0; i < kVecs; ++i) {
#if defined(FLASHSERVE_AVX512)
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * W * i));
      w[i] = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
#elif defined(FLASHSERVE_AVX2)
      const auto* h = reinterpret_cast<const __m128i*>(p + 2 * W * i);
      auto widen8 = [](__m128i b) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16)); };
      w[i] = {widen8(_mm_loadu_si128(h)), widen8(_mm_loadu_si128(h + 1))};
#else
      w[i] = each([&](int j) { return elem(p, i * W + j); });
#endif
    }
  }
};

// The 32-element block types share the shape; Block says which codec and layout.
template <class Block>
struct BlockW {
  static constexpr bool kQuantized = true;
  static constexpr int kElems = kChunk;
  static constexpr size_t kBytes = sizeof(Block);
};
// Each 32-element block type's decoder (the super-blocks': matmul_kquants.cpp).
template <class Block>
struct Decoder;

template <>
struct Decoder<BlockQ8_0> : BlockW<BlockQ8_0> {
  static void decode(const char* p, int, V* w) {
    const auto& b = *reinterpret_cast<const BlockQ8_0*>(p);
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
    const V d = set1(half_scale(b.d));
    for (int i = 0; i < kVecs; ++i) {
#if defined(FLASHSERVE_AVX512)
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + W * i));
      w[i] = mul(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
#else
      auto widen8 = [](const int8_t* q) {
        return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
      };
      w[i] = mul(V{widen8(b.qs + W * i), widen8(b.qs + W * i + 8)}, d);
#endif
    }
#else
    decode_floats(b, w);
#endif
  }
};

template <>
struct Decoder<BlockQ4_0> : BlockW<BlockQ4_0> {
  static void decode(const char* p, int, V* w) {
    const auto& b = *reinterpret_cast<const BlockQ4_0*>(p);
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
    // d * q - 8d rounds once, exactly like (q - 8) * d: -8d is exact.
    const float d = half_scale(b.d);
    unpack_nibbles(b.qs, w);
    for (int i = 0; i < kVecs; ++i) w[i] = fma(w[i], set1(d), set1(-8.0f * d));
#else
    decode_floats(b, w);
#endif
  }
};

template <>
struct Decoder<BlockQ4_1> : BlockW<BlockQ4_1> {
  static void decode(const char* p, int, V* w) {
    const auto& b = *reinterpret_cast<const BlockQ4_1*>(p);
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
    const V d = set1(half_scale(b.d));
    const V m = set1(half_scale(b.m));
    unpack_nibbles(b.qs, w);
    for (int i = 0; i < kVecs; ++i) w[i] = fma(w[i], d, m);
#else
    decode_floats(b, w);
#endif
  }
};

template <>
struct Decoder<BlockQ5_0> : BlockW<BlockQ5_0> {
  static void decode(const char* p, int, V* w) {
    const auto& b = *reinterpret_cast<const BlockQ5_0*>(p);
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
    widen_bytes<true>(_mm256_sub_epi8(q5_bytes(b.qs, b.qh), _mm256_set1_epi8(16)), w);
    const V d = set1(half_scale(b.d));
    for (int i = 0; i < kVecs; ++i) w[i] = mul(w[i], d);
#else
    decode_floats(b, w);
#endif
  }
};

template <>
struct Decoder<BlockQ5_1> : BlockW<BlockQ5_1> {
  static void decode(const char* p, int, V* w) {
    const auto& b = *reinterpret_cast<const BlockQ5_1*>(p);
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
    widen_bytes<false>(q5_bytes(b.qs, b.qh), w);
    const V d = set1(half_scale(b.d));
    const V m = set1(half_scale(b.m));
    for (int i = 0; i < kVecs; ++i) w[i] = fma(w[i], d, m);
#else
    decode_floats(b, w);
#endif
  }
};

template <>
struct Decoder<BlockIQ4_NL> : BlockW<BlockIQ4_NL> {
  static void decode(const char* p, int, V* w) {
    const auto& b = *reinterpret_cast<const BlockIQ4_NL*>(p);
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
    widen_bytes<true>(iq4_lookup(nibble_bytes(b.qs)), w);
    const V d = set1(half_scale(b.d));
    for (int i = 0; i < kVecs; ++i) w[i] = mul(w[i], d);
#else
    decode_floats(b, w);
#endif
  }
};

void check_k(DType t, int64_t k) {
  if (k % block_elems(t) != 0)
    throw_invalid_argument("matmul: k=%lld is not whole blocks of %s", (long long)k, dtype_name(t).data());
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
    default:
      with_block(wtype, [&]<class B, int64_t kElems>() {
        if constexpr (kElems == kSuperBlock) matmul_super_blocks(x, num_tokens, k, wb, wtype, rb, n_out, y);
        else matmul_typed<Decoder<B>>(x, num_tokens, k, wb, rb, n_out, y);
      });
  }
}

void get_row(const void* w, DType wtype, int64_t k, int64_t row, float* out) {
  check_k(wtype, k);
  dequantize_row(wtype, static_cast<const char*>(w) + row * row_bytes(wtype, k), out, k);
}

void get_rows(const void* w, DType wtype, int64_t k, const int32_t* ids, int64_t n, float* out) {
  // Checked once up front: nothing inside the parallel loop may throw.
  check_k(wtype, k);
  // Qualified: through its DType argument the call would also find the public, dispatching get_row.
  parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) FLASHSERVE_ISA::get_row(w, wtype, k, ids[i], out + i * k);
      },
      n * k >= (1 << 16));
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
