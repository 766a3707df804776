// Decoders of the 256-element super-block types for the tiled matmul (interface in matmul_tile.h).
// Each decodes one 32-element chunk: the chunk's quants are gathered into 32 bytes with integer
// ops, widened to floats, and scaled with codec's per-chunk scales, so every value is the scalar
// codec's bit for bit (kquant_codec.h says why fusing cannot change one).
#include "kernels/cpu/kquant_codec.h"
#include "kernels/cpu/matmul_tile.h"

namespace flashserve::kernels::FLASHSERVE_ISA::tile {
namespace {

template <class Block>
struct SuperBlockW {
  static constexpr bool kQuantized = true;
  static constexpr int kElems = int(kSuperBlock);
  static constexpr size_t kBytes = sizeof(Block);
  static const Block& block(const char* p) { return *reinterpret_cast<const Block*>(p); }
};

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)

// Each super-block type's decoder.
template <class Block>
struct Decoder;

template <>
struct Decoder<BlockQ2_K> : SuperBlockW<BlockQ2_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<false>(two_bit_quants(b.qs, c), w);
    const float d = half_scale(b.d), dmin = half_scale(b.dmin);
    const codec::Affine a0 = codec::q2k_affine(b, 2 * c, d, dmin), a1 = codec::q2k_affine(b, 2 * c + 1, d, dmin);
    for (int i = 0; i < kVecs; ++i)
      w[i] = fma(w[i], set1(half_pick(i, a0.d, a1.d)), set1(-half_pick(i, a0.m, a1.m)));
  }
};

template <>
struct Decoder<BlockQ3_K> : SuperBlockW<BlockQ3_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<true>(q3k_bytes(b, c), w);
    const float d = half_scale(b.d);
    const float d0 = codec::q3k_scale(b, 2 * c, d), d1 = codec::q3k_scale(b, 2 * c + 1, d);
    for (int i = 0; i < kVecs; ++i) w[i] = mul(w[i], set1(half_pick(i, d0, d1)));
  }
};

template <>
struct Decoder<BlockQ4_K> : SuperBlockW<BlockQ4_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<false>(k_nibbles(b, c), w);
    const codec::Affine a = codec::k_affine(b, c, half_scale(b.d), half_scale(b.dmin));
    for (int i = 0; i < kVecs; ++i) w[i] = fma(w[i], set1(a.d), set1(-a.m));
  }
};

template <>
struct Decoder<BlockQ5_K> : SuperBlockW<BlockQ5_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<false>(q5k_bytes(b, c), w);
    const codec::Affine a = codec::k_affine(b, c, half_scale(b.d), half_scale(b.dmin));
    for (int i = 0; i < kVecs; ++i) w[i] = fma(w[i], set1(a.d), set1(-a.m));
  }
};

template <>
struct Decoder<BlockQ6_K> : SuperBlockW<BlockQ6_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<true>(q6k_bytes(b, c), w);
    const float d = half_scale(b.d);
    const float d0 = codec::q6k_scale(b, 2 * c, d), d1 = codec::q6k_scale(b, 2 * c + 1, d);
    for (int i = 0; i < kVecs; ++i) w[i] = mul(w[i], set1(half_pick(i, d0, d1)));
  }
};

template <>
struct Decoder<BlockQ8_K> : SuperBlockW<BlockQ8_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<true>(load_bytes32(reinterpret_cast<const uint8_t*>(b.qs) + 32 * c), w);
    for (int i = 0; i < kVecs; ++i) w[i] = mul(w[i], set1(b.d));
  }
};

template <>
struct Decoder<BlockIQ4_XS> : SuperBlockW<BlockIQ4_XS> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<true>(iq4_lookup(nibble_bytes(b.qs + 16 * c)), w);
    const V d = set1(codec::iq4xs_scale(b, c, half_scale(b.d)));
    for (int i = 0; i < kVecs; ++i) w[i] = mul(w[i], d);
  }
};

#else

// Portable build: the scalar codec's 32 values of chunk c, as vectors.
template <class Block>
struct Decoder : SuperBlockW<Block> {
  static void decode(const char* p, int c, V* w) {
    float f[kChunk];
    codec::decode_chunk(SuperBlockW<Block>::block(p), c, f);
    for (int i = 0; i < kVecs; ++i) w[i] = load(f + i * W);
  }
};

#endif

}  // namespace

void matmul_super_blocks(const float* x, int64_t num_tokens, int64_t k, const char* w, DType wtype,
                         size_t rb, int64_t n_out, float* y) {
  with_block(wtype, [&]<class B, int64_t kElems>() {
    if constexpr (kElems == kSuperBlock) matmul_typed<Decoder<B>>(x, num_tokens, k, w, rb, n_out, y);
  });
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA::tile
