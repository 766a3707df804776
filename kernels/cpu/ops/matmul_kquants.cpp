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

struct Q2_KW : SuperBlockW<BlockQ2_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<false>(two_bit_quants(b.qs, c), w);
    const float d = half_scale(b.d), dmin = half_scale(b.dmin);
    const codec::Affine a0 = codec::q2k_affine(b, 2 * c, d, dmin), a1 = codec::q2k_affine(b, 2 * c + 1, d, dmin);
    for (int i = 0; i < kVecs; ++i)
      w[i] = fma(w[i], set1(half_pick(i, a0.d, a1.d)), set1(-half_pick(i, a0.m, a1.m)));
  }
};

struct Q3_KW : SuperBlockW<BlockQ3_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<true>(q3k_bytes(b, c), w);
    const float d = half_scale(b.d);
    const float d0 = codec::q3k_scale(b, 2 * c, d), d1 = codec::q3k_scale(b, 2 * c + 1, d);
    for (int i = 0; i < kVecs; ++i) w[i] = mul(w[i], set1(half_pick(i, d0, d1)));
  }
};

struct Q4_KW : SuperBlockW<BlockQ4_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<false>(k_nibbles(b, c), w);
    const codec::Affine a = codec::k_affine(b, c, half_scale(b.d), half_scale(b.dmin));
    for (int i = 0; i < kVecs; ++i) w[i] = fma(w[i], set1(a.d), set1(-a.m));
  }
};

struct Q5_KW : SuperBlockW<BlockQ5_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<false>(q5k_bytes(b, c), w);
    const codec::Affine a = codec::k_affine(b, c, half_scale(b.d), half_scale(b.dmin));
    for (int i = 0; i < kVecs; ++i) w[i] = fma(w[i], set1(a.d), set1(-a.m));
  }
};

struct Q6_KW : SuperBlockW<BlockQ6_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<true>(q6k_bytes(b, c), w);
    const float d = half_scale(b.d);
    const float d0 = codec::q6k_scale(b, 2 * c, d), d1 = codec::q6k_scale(b, 2 * c + 1, d);
    for (int i = 0; i < kVecs; ++i) w[i] = mul(w[i], set1(half_pick(i, d0, d1)));
  }
};

struct Q8_KW : SuperBlockW<BlockQ8_K> {
  static void decode(const char* p, int c, V* w) {
    const auto& b = block(p);
    widen_bytes<true>(load_bytes32(reinterpret_cast<const uint8_t*>(b.qs) + 32 * c), w);
    for (int i = 0; i < kVecs; ++i) w[i] = mul(w[i], set1(b.d));
  }
};

struct IQ4_XSW : SuperBlockW<BlockIQ4_XS> {
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
struct ScalarW : SuperBlockW<Block> {
  static void decode(const char* p, int c, V* w) {
    float f[kChunk];
    codec::decode_chunk(SuperBlockW<Block>::block(p), c, f);
    for (int i = 0; i < kVecs; ++i) w[i] = load(f + i * W);
  }
};
using Q2_KW = ScalarW<BlockQ2_K>;
using Q3_KW = ScalarW<BlockQ3_K>;
using Q4_KW = ScalarW<BlockQ4_K>;
using Q5_KW = ScalarW<BlockQ5_K>;
using Q6_KW = ScalarW<BlockQ6_K>;
using Q8_KW = ScalarW<BlockQ8_K>;
using IQ4_XSW = ScalarW<BlockIQ4_XS>;

#endif

}  // namespace

void matmul_super_blocks(const float* x, int64_t num_tokens, int64_t k, const char* w, DType wtype,
                         size_t rb, int64_t n_out, float* y) {
  switch (wtype) {
    case DType::Q2_K: return matmul_typed<Q2_KW>(x, num_tokens, k, w, rb, n_out, y);
    case DType::Q3_K: return matmul_typed<Q3_KW>(x, num_tokens, k, w, rb, n_out, y);
    case DType::Q4_K: return matmul_typed<Q4_KW>(x, num_tokens, k, w, rb, n_out, y);
    case DType::Q5_K: return matmul_typed<Q5_KW>(x, num_tokens, k, w, rb, n_out, y);
    case DType::Q6_K: return matmul_typed<Q6_KW>(x, num_tokens, k, w, rb, n_out, y);
    case DType::Q8_K: return matmul_typed<Q8_KW>(x, num_tokens, k, w, rb, n_out, y);
    case DType::IQ4_XS: return matmul_typed<IQ4_XSW>(x, num_tokens, k, w, rb, n_out, y);
    default: return;  // matmul routes only the types above here
  }
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA::tile
