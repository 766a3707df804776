// Device decoders of the quantized GGUF weight formats, shared by the matmul (GEMV and the expansion
// to f16) and the embedding gather. Each decodes one 32-element chunk: a whole block of the 32-element
// types, chunk c (0..7) of a 256-element super-block for the K-quants and IQ4_XS, as the CPU's
// kquant_codec.h does, so a GEMV lane always owns 32 consecutive weights.
//
// Every value equals the CPU codec's bit for bit: the same expressions in the same order, each a
// single rounding. A half scale times a sub-block code (at most 8 bits) is exact in f32, and so is
// that times q (at most 24 significant bits) for every type but Q6_K and Q8_K, whose one rounding is
// pinned with __fmul_rn. The affine types (x = q a - b) use fmaf, whose product is exact, so it
// agrees with the CPU's mul_add whether or not that fuses.
//
// GGUF rows are only 2-byte aligned (block sizes 18, 22, 110, 210, ...), so every read is a byte or
// 16-bit load, Q8_K's f32 scale included.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace flashserve::kernels::cuda {

constexpr int kChunk = 32;  // weights one decode call produces

// Elements and bytes of one storage block; {0, 0} for a type the CUDA kernels do not take. Made
// from kernels/dtype.h's list of block types (not row_bytes() from the CPU library), so the CUDA
// kernels carry their own copy of the layouts.
struct BlockLayout {
  int64_t elems, bytes;
};

constexpr BlockLayout block_layout(DType t) {
  switch (t) {
    case DType::F32: return {1, 4};
    case DType::F16:
    case DType::BF16: return {1, 2};
#define FLASHSERVE_BLOCK_LAYOUT(type, block, elems) \
  case DType::type: return {elems, sizeof(block)};
    FLASHSERVE_BLOCK_TYPES(FLASHSERVE_BLOCK_LAYOUT)
#undef FLASHSERVE_BLOCK_LAYOUT
    case DType::F8_E4M3: break;  // a KV cache type, never a weight
  }
  return {0, 0};
}

// The device decoder of each quantized type, by its host block struct (kernels/dtype.h): a
// specialization below for every type of FLASHSERVE_BLOCK_TYPES. Kernels take it as a template
// parameter and with_decoder picks it for a DType, so no CUDA file lists the types.
template <class Block>
struct Decoder;

// ---- loads ----

__device__ __forceinline__ uint32_t load_u8(const char* p) { return __ldg(reinterpret_cast<const unsigned char*>(p)); }
__device__ __forceinline__ uint16_t load_u16(const char* p) {
  return __ldg(reinterpret_cast<const unsigned short*>(p));
}
// Little-endian u32 at a 2-byte aligned address.
__device__ __forceinline__ uint32_t load_u32(const char* p) { return load_u16(p) | uint32_t(load_u16(p + 2)) << 16; }
__device__ __forceinline__ float half_value(uint16_t h) { return __half2float(__ushort_as_half(h)); }

// The IQ4 codebook, 4 bytes to a word, so a lookup is a register byte select instead of a memory read.
constexpr uint32_t iq4_word(int i) {
  return uint32_t(uint8_t(kIQ4Values[4 * i])) | uint32_t(uint8_t(kIQ4Values[4 * i + 1])) << 8 |
         uint32_t(uint8_t(kIQ4Values[4 * i + 2])) << 16 | uint32_t(uint8_t(kIQ4Values[4 * i + 3])) << 24;
}
constexpr uint32_t kIQ4Word0 = iq4_word(0), kIQ4Word1 = iq4_word(1), kIQ4Word2 = iq4_word(2), kIQ4Word3 = iq4_word(3);

// kIQ4Values[q] for q in 0..15: __byte_perm(x, y, s) returns byte s & 7 of the 8 bytes {y:x} in its
// low byte, so each pair of words serves 8 entries and bit 3 of q picks the pair.
__device__ __forceinline__ float iq4_value(uint32_t q) {
  const uint32_t lo = __byte_perm(kIQ4Word0, kIQ4Word1, q & 7), hi = __byte_perm(kIQ4Word2, kIQ4Word3, q & 7);
  return float(int8_t(uint8_t((q & 8) != 0 ? hi : lo)));
}

// Fifth bit of element e (0..31) from a Q5_x block's qh word.
__device__ __forceinline__ int bit5(uint32_t qh, int e) { return int((qh >> e) & 1) << 4; }

// ---- 32-element blocks ----
// In the byte-pair loops below, the 16-bit word j of 16 nibble bytes holds elements 2j (bits 0-3),
// 2j + 16 (4-7), 2j + 1 (8-11) and 2j + 17 (12-15).

template <>
struct Decoder<BlockQ4_0> {
  static constexpr int kElems = 32, kBytes = 18;
  __device__ static void decode(const char* p, int /*chunk*/, float (&w)[kChunk]) {
    const float d = half_value(load_u16(p));
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t q = load_u16(p + 2 + 2 * j);
      w[2 * j] = float(int(q & 0xf) - 8) * d;
      w[2 * j + 16] = float(int((q >> 4) & 0xf) - 8) * d;
      w[2 * j + 1] = float(int((q >> 8) & 0xf) - 8) * d;
      w[2 * j + 17] = float(int(q >> 12) - 8) * d;
    }
  }
};

template <>
struct Decoder<BlockQ4_1> {
  static constexpr int kElems = 32, kBytes = 20;
  __device__ static void decode(const char* p, int /*chunk*/, float (&w)[kChunk]) {
    const float d = half_value(load_u16(p));
    const float m = half_value(load_u16(p + 2));
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t q = load_u16(p + 4 + 2 * j);
      w[2 * j] = fmaf(float(q & 0xf), d, m);
      w[2 * j + 16] = fmaf(float((q >> 4) & 0xf), d, m);
      w[2 * j + 1] = fmaf(float((q >> 8) & 0xf), d, m);
      w[2 * j + 17] = fmaf(float(q >> 12), d, m);
    }
  }
};

// d, qh (u32), 16 nibble bytes. x = d * (q - 16).
template <>
struct Decoder<BlockQ5_0> {
  static constexpr int kElems = 32, kBytes = 22;
  __device__ static void decode(const char* p, int /*chunk*/, float (&w)[kChunk]) {
    const float d = half_value(load_u16(p));
    const uint32_t qh = load_u32(p + 2);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t q = load_u16(p + 6 + 2 * j);
      w[2 * j] = float((int(q & 0xf) | bit5(qh, 2 * j)) - 16) * d;
      w[2 * j + 16] = float((int((q >> 4) & 0xf) | bit5(qh, 2 * j + 16)) - 16) * d;
      w[2 * j + 1] = float((int((q >> 8) & 0xf) | bit5(qh, 2 * j + 1)) - 16) * d;
      w[2 * j + 17] = float((int(q >> 12) | bit5(qh, 2 * j + 17)) - 16) * d;
    }
  }
};

// d, m, qh (u32), 16 nibble bytes. x = d * q + m.
template <>
struct Decoder<BlockQ5_1> {
  static constexpr int kElems = 32, kBytes = 24;
  __device__ static void decode(const char* p, int /*chunk*/, float (&w)[kChunk]) {
    const float d = half_value(load_u16(p));
    const float m = half_value(load_u16(p + 2));
    const uint32_t qh = load_u32(p + 4);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t q = load_u16(p + 8 + 2 * j);
      w[2 * j] = fmaf(float(int(q & 0xf) | bit5(qh, 2 * j)), d, m);
      w[2 * j + 16] = fmaf(float(int((q >> 4) & 0xf) | bit5(qh, 2 * j + 16)), d, m);
      w[2 * j + 1] = fmaf(float(int((q >> 8) & 0xf) | bit5(qh, 2 * j + 1)), d, m);
      w[2 * j + 17] = fmaf(float(int(q >> 12) | bit5(qh, 2 * j + 17)), d, m);
    }
  }
};

template <>
struct Decoder<BlockQ8_0> {
  static constexpr int kElems = 32, kBytes = 34;
  __device__ static void decode(const char* p, int /*chunk*/, float (&w)[kChunk]) {
    const float d = half_value(load_u16(p));
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint32_t q = load_u16(p + 2 + 2 * j);
      w[2 * j] = float(int8_t(q & 0xff)) * d;
      w[2 * j + 1] = float(int8_t(q >> 8)) * d;
    }
  }
};

// 16 bytes of IQ4 nibbles at qs times the scale d (IQ4_NL's block, IQ4_XS's chunk).
__device__ __forceinline__ void decode_iq4(const char* qs, float d, float (&w)[kChunk]) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const uint32_t q = load_u16(qs + 2 * j);
    w[2 * j] = iq4_value(q & 0xf) * d;
    w[2 * j + 16] = iq4_value((q >> 4) & 0xf) * d;
    w[2 * j + 1] = iq4_value((q >> 8) & 0xf) * d;
    w[2 * j + 17] = iq4_value(q >> 12) * d;
  }
}

// d, 16 nibble bytes. x = d * kIQ4Values[q].
template <>
struct Decoder<BlockIQ4_NL> {
  static constexpr int kElems = 32, kBytes = 18;
  __device__ static void decode(const char* p, int /*chunk*/, float (&w)[kChunk]) {
    decode_iq4(p + 2, half_value(load_u16(p)), w);
  }
};

// ---- 256-element super-blocks, chunk c = 0..7 (layouts in kernels/dtype.h) ----

// scales[16] @0, qs[64] @16, d @80, dmin @82. Sub-block i = 2c + l / 16: x = (d s_i) q - dmin m_i.
template <>
struct Decoder<BlockQ2_K> {
  static constexpr int kElems = 256, kBytes = 84;
  __device__ static void decode(const char* p, int c, float (&w)[kChunk]) {
    const float d = half_value(load_u16(p + 80)), dmin = half_value(load_u16(p + 82));
    const char* qs = p + 16 + 32 * (c / 4);
    const int shift = 2 * (c % 4);
#pragma unroll
    for (int sub = 0; sub < 2; ++sub) {
      const uint32_t sm = load_u8(p + 2 * c + sub);
      const float scale = d * float(sm & 0x0f), offset = dmin * float(sm >> 4);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int l = 16 * sub + 2 * j;
        const uint32_t q = load_u16(qs + l);
        w[l] = fmaf(float((q >> shift) & 3), scale, -offset);
        w[l + 1] = fmaf(float((q >> (8 + shift)) & 3), scale, -offset);
      }
    }
  }
};

// hmask[32] @0, qs[64] @32, scales[12] @96, d @108. x = (d (s_i - 32)) q, q = low 2 bits minus 4
// where bit c of hmask[l] is clear.
template <>
struct Decoder<BlockQ3_K> {
  static constexpr int kElems = 256, kBytes = 110;
  __device__ static void decode(const char* p, int c, float (&w)[kChunk]) {
    const float d = half_value(load_u16(p + 108));
    const char* qs = p + 32 + 32 * (c / 4);
    const int shift = 2 * (c % 4);
#pragma unroll
    for (int sub = 0; sub < 2; ++sub) {
      const int i = 2 * c + sub;
      const uint32_t lo = (load_u8(p + 96 + i % 8) >> (4 * (i / 8))) & 0x0f;
      const uint32_t hi = (load_u8(p + 96 + 8 + i % 4) >> (2 * (i / 4))) & 3;
      const float scale = d * float(int(lo | hi << 4) - 32);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int l = 16 * sub + 2 * j;
        const uint32_t q = load_u16(qs + l), hm = load_u16(p + l);
        const int q0 = int((q >> shift) & 3) - ((hm >> c) & 1 ? 0 : 4);
        const int q1 = int((q >> (8 + shift)) & 3) - ((hm >> (8 + c)) & 1 ? 0 : 4);
        w[l] = float(q0) * scale;
        w[l + 1] = float(q1) * scale;
      }
    }
  }
};

// Q4_K / Q5_K: chunk c's 6-bit scale code sc and min code mc from the 12 scale bytes at s, as the
// affine pair (d sc, dmin mc).
__device__ __forceinline__ void k_affine(const char* s, int c, float d, float dmin, float& scale, float& offset) {
  uint32_t sc, mc;
  if (c < 4) {
    sc = load_u8(s + c) & 63;
    mc = load_u8(s + c + 4) & 63;
  } else {
    const uint32_t low = load_u8(s + c + 4);
    sc = (low & 0x0f) | (load_u8(s + c - 4) >> 6) << 4;
    mc = (low >> 4) | (load_u8(s + c) >> 6) << 4;
  }
  scale = d * float(sc);
  offset = dmin * float(mc);
}

// d @0, dmin @2, scales[12] @4, qs[128] @16. x = (d s) q - dmin m.
template <>
struct Decoder<BlockQ4_K> {
  static constexpr int kElems = 256, kBytes = 144;
  __device__ static void decode(const char* p, int c, float (&w)[kChunk]) {
    float scale, offset;
    k_affine(p + 4, c, half_value(load_u16(p)), half_value(load_u16(p + 2)), scale, offset);
    const char* qs = p + 16 + 32 * (c / 2);
    const int shift = 4 * (c % 2);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint32_t q = load_u16(qs + 2 * j);
      w[2 * j] = fmaf(float((q >> shift) & 0x0f), scale, -offset);
      w[2 * j + 1] = fmaf(float((q >> (8 + shift)) & 0x0f), scale, -offset);
    }
  }
};

// d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48. As Q4_K, bit c of qh[l] the fifth bit.
template <>
struct Decoder<BlockQ5_K> {
  static constexpr int kElems = 256, kBytes = 176;
  __device__ static void decode(const char* p, int c, float (&w)[kChunk]) {
    float scale, offset;
    k_affine(p + 4, c, half_value(load_u16(p)), half_value(load_u16(p + 2)), scale, offset);
    const char* qs = p + 48 + 32 * (c / 2);
    const int shift = 4 * (c % 2);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint32_t q = load_u16(qs + 2 * j), h = load_u16(p + 16 + 2 * j);
      const uint32_t q0 = ((q >> shift) & 0x0f) | ((h >> c) & 1) << 4;
      const uint32_t q1 = ((q >> (8 + shift)) & 0x0f) | ((h >> (8 + c)) & 1) << 4;
      w[2 * j] = fmaf(float(q0), scale, -offset);
      w[2 * j + 1] = fmaf(float(q1), scale, -offset);
    }
  }
};

// ql[128] @0, qh[64] @128, int8 scales[16] @192, d @208. x = (d s_i) (q - 32): one rounding.
template <>
struct Decoder<BlockQ6_K> {
  static constexpr int kElems = 256, kBytes = 210;
  __device__ static void decode(const char* p, int c, float (&w)[kChunk]) {
    const float d = half_value(load_u16(p + 208));
    const int h = c / 4, g = c % 4;
    const char* ql = p + 64 * h + 32 * (g % 2);
    const char* qh = p + 128 + 32 * h;
    const int low_shift = 4 * (g / 2), high_shift = 2 * g;
#pragma unroll
    for (int sub = 0; sub < 2; ++sub) {
      const float scale = d * float(int8_t(uint8_t(load_u8(p + 192 + 2 * c + sub))));
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int l = 16 * sub + 2 * j;
        const uint32_t lo = load_u16(ql + l), hi = load_u16(qh + l);
        const int q0 = int(((lo >> low_shift) & 0x0f) | ((hi >> high_shift) & 3) << 4);
        const int q1 = int(((lo >> (8 + low_shift)) & 0x0f) | ((hi >> (8 + high_shift)) & 3) << 4);
        w[l] = __fmul_rn(float(q0 - 32), scale);
        w[l + 1] = __fmul_rn(float(q1 - 32), scale);
      }
    }
  }
};

// f32 d @0, int8 qs[256] @4, bsums (unused). x = d q: one rounding.
template <>
struct Decoder<BlockQ8_K> {
  static constexpr int kElems = 256, kBytes = 292;
  __device__ static void decode(const char* p, int c, float (&w)[kChunk]) {
    const float d = __uint_as_float(load_u32(p));
    const char* qs = p + 4 + 32 * c;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const uint32_t q = load_u16(qs + 2 * j);
      w[2 * j] = __fmul_rn(float(int8_t(q & 0xff)), d);
      w[2 * j + 1] = __fmul_rn(float(int8_t(q >> 8)), d);
    }
  }
};

// d @0, scales_h (u16) @2, scales_l[4] @4, qs[128] @8; chunk c is IQ4_NL's nibble block at qs + 16 c
// scaled by d (s_c - 32).
template <>
struct Decoder<BlockIQ4_XS> {
  static constexpr int kElems = 256, kBytes = 136;
  __device__ static void decode(const char* p, int c, float (&w)[kChunk]) {
    const uint32_t lo = (load_u8(p + 4 + c / 2) >> (4 * (c % 2))) & 0x0f;
    const uint32_t hi = (uint32_t(load_u16(p + 2)) >> (2 * c)) & 3;
    decode_iq4(p + 8 + 16 * c, half_value(load_u16(p)) * float(int(lo | hi << 4) - 32), w);
  }
};

static_assert(Decoder<BlockQ4_0>::kBytes == sizeof(BlockQ4_0) && Decoder<BlockQ4_1>::kBytes == sizeof(BlockQ4_1) &&
              Decoder<BlockQ5_0>::kBytes == sizeof(BlockQ5_0) && Decoder<BlockQ5_1>::kBytes == sizeof(BlockQ5_1) &&
              Decoder<BlockQ8_0>::kBytes == sizeof(BlockQ8_0) && Decoder<BlockIQ4_NL>::kBytes == sizeof(BlockIQ4_NL));
static_assert(Decoder<BlockQ2_K>::kBytes == sizeof(BlockQ2_K) && Decoder<BlockQ3_K>::kBytes == sizeof(BlockQ3_K) &&
              Decoder<BlockQ4_K>::kBytes == sizeof(BlockQ4_K) && Decoder<BlockQ5_K>::kBytes == sizeof(BlockQ5_K) &&
              Decoder<BlockQ6_K>::kBytes == sizeof(BlockQ6_K) && Decoder<BlockQ8_K>::kBytes == sizeof(BlockQ8_K) &&
              Decoder<BlockIQ4_XS>::kBytes == sizeof(BlockIQ4_XS));

// f.template operator()<Decoder<Block>>() for t's block struct; false (f not called) for a float
// type. A functor, not a lambda: the .cu files are C++17, which has no template lambdas.
template <class F>
struct WithDecoder {
  F& f;
  template <class Block, int64_t kElems>
  void operator()() {
    f.template operator()<Decoder<Block>>();
  }
};
template <class F>
bool with_decoder(DType t, F&& f) {
  return with_block(t, WithDecoder<F>{f});
}

// Weights 32 g .. 32 g + 31 of a run of whole blocks starting at base (a row, or rows back to back).
template <class D>
__device__ __forceinline__ void decode_chunk(const char* base, int64_t g, float (&w)[kChunk]) {
  constexpr int kChunks = D::kElems / kChunk;
  D::decode(base + (g / kChunks) * D::kBytes, int(g % kChunks), w);
}

}  // namespace flashserve::kernels::cuda
