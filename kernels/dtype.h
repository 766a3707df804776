// Element types of weight tensors, with the block layouts GGUF stores them in.
// Quantized types pack a block of 32 elements with its scale, or (K-quants, IQ4_XS) a super-block
// of 256 elements in sub-blocks with their own small scales; values are GGML's type ids so a GGUF
// tensor's type field maps directly. Every f16 field is IEEE binary16, every struct little-endian.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace flashserve::kernels {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,   // block: f16 d; 16 bytes of nibbles. x = d * (q - 8)
  Q4_1 = 3,   // block: f16 d, f16 m; 16 bytes of nibbles. x = d * q + m
  Q5_0 = 6,   // block: f16 d, 32 high bits, 16 bytes of nibbles. x = d * (q - 16)
  Q5_1 = 7,   // block: f16 d, f16 m, 32 high bits, 16 bytes of nibbles. x = d * q + m
  Q8_0 = 8,   // block: f16 d; 32 int8. x = d * q
  Q2_K = 10,  // 16 sub-blocks of 16: 4-bit scale s, 4-bit min m; x = d * s * q - dmin * m, q 0..3
  Q3_K = 11,  // 16 sub-blocks of 16: 6-bit scale s; x = d * (s - 32) * q, q -4..3
  Q4_K = 12,  // 8 sub-blocks of 32: 6-bit scale s and min m; x = d * s * q - dmin * m, q 0..15
  Q5_K = 13,  // as Q4_K with q 0..31
  Q6_K = 14,  // 16 sub-blocks of 16: int8 scale s; x = d * s * (q - 32), q 0..63
  Q8_K = 15,  // f32 d; 256 int8 and their sums per 16. x = d * q
  IQ4_NL = 20,  // block: f16 d; 16 bytes of nibbles. x = d * kIQ4Values[q]
  IQ4_XS = 23,  // 8 sub-blocks of 32: 6-bit scale s; x = d * (s - 32) * kIQ4Values[q]
  BF16 = 30,
  // Not a GGML type (no model file holds it): the KV cache's fp8, OCP E4M3 (4 exponent bits, bias
  // 7, 3 mantissa bits; no infinities, 0x7f and 0xff are NaN; largest finite 448).
  F8_E4M3 = 1000,
};

// Nibble order in 32-element blocks (Q4_x, Q5_x, IQ4_NL): byte j holds element j (low nibble) and
// element j + 16 (high). Q5_x: bit j of qh (read as a little-endian u32) is element j's fifth bit.
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[16]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[16]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
struct BlockIQ4_NL { uint16_t d; uint8_t qs[16]; };
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 && sizeof(BlockIQ4_NL) == 18);

// Super-blocks of 256 elements, seen as 8 chunks of 32 (element e = 32 c + l):
// - Q2_K, Q3_K: chunk c's 2-bit q_l sits at bits 2 (c % 4) of qs[32 (c / 4) + l]; Q3_K subtracts 4
//   where bit c of hmask[l] is clear. Q2_K scales[i]: low nibble s, high m of sub-block i = e / 16.
//   Q3_K's 6-bit s of sub-block i: low 4 bits from scales[i % 8] (nibble i / 8), high 2 bits from
//   scales[8 + i % 4] (bits 2 (i / 4)).
// - Q4_K, Q5_K: q_l is nibble c % 2 of qs[32 (c / 2) + l]; Q5_K's fifth bit is bit c of qh[l].
//   6-bit s and m of chunk j < 4: low 6 bits of scales[j] and scales[j + 4]; of j >= 4: low and high
//   nibble of scales[j + 4], topped with the high 2 bits of scales[j - 4] and scales[j].
// - Q6_K: half h = c / 4, g = c % 4: low 4 bits are nibble g / 2 of ql[64 h + 32 (g % 2) + l], high 2
//   bits are bits 2 g of qh[32 h + l]; sub-block i = e / 16 scales by scales[i].
// - IQ4_XS: chunk c is 16 bytes of nibbles at qs[16 c] ordered as in IQ4_NL; its 6-bit s is nibble
//   c % 2 of scales_l[c / 2] topped with bits 2 c of scales_h.
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d; uint16_t dmin; };
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct BlockQ8_K { float d; int8_t qs[256]; int16_t bsums[16]; };
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_XS) == 136);

// Q4_K / Q5_K chunk j's 6-bit scale and minimum, packed in `scales` (12 bytes): chunks 0-3 in the
// low six bits of bytes j and j + 4, chunks 4-7 in byte j + 4's nibbles topped with the high two
// bits of bytes j - 4 and j.
struct ScaleMin { int sc, m; };
inline ScaleMin k_scale_min(const uint8_t* s, int j) {
  if (j < 4) return {s[j] & 63, s[j + 4] & 63};
  return {(s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4, (s[j + 4] >> 4) | (s[j] >> 6) << 4};
}

// IQ4_XS chunk c's scale as a signed integer (d times it scales the chunk): 4 low bits from
// scales_l, 2 high bits from scales_h, minus 32.
inline int iq4xs_scale_code(uint8_t scales_l_byte, uint16_t scales_h, int c) {
  return (((scales_l_byte >> (4 * (c % 2))) & 0x0f) | ((scales_h >> (2 * c)) & 3) << 4) - 32;
}

// Q3_K sub-block i's scale as a signed integer (d times it scales the sub-block): 4 low bits from
// scales[i % 8] (nibble i / 8), 2 high bits from scales[8 + i % 4] (bits 2 (i / 4)), minus 32.
inline int q3k_scale_code(const uint8_t* scales, int i) {
  return (((scales[i % 8] >> (4 * (i / 8))) & 0x0f) | ((scales[8 + i % 4] >> (2 * (i / 4))) & 3) << 4) - 32;
}

constexpr int64_t kQuantBlock = 32;
constexpr int64_t kSuperBlock = 256;

// The block types once, as (DType, its block, elements a block): the per-type switches are made from
// this list (kernels/cpu/dtype.cpp's names, sizes and row codecs), and with_block runs code written
// once for a block struct. A new type is a line here, its block above and its codec.
#define FLASHSERVE_BLOCK_TYPES(X)                                                                   \
  X(Q4_0, BlockQ4_0, kQuantBlock) X(Q4_1, BlockQ4_1, kQuantBlock) X(Q5_0, BlockQ5_0, kQuantBlock)   \
  X(Q5_1, BlockQ5_1, kQuantBlock) X(Q8_0, BlockQ8_0, kQuantBlock) X(IQ4_NL, BlockIQ4_NL, kQuantBlock) \
  X(Q2_K, BlockQ2_K, kSuperBlock) X(Q3_K, BlockQ3_K, kSuperBlock) X(Q4_K, BlockQ4_K, kSuperBlock)   \
  X(Q5_K, BlockQ5_K, kSuperBlock) X(Q6_K, BlockQ6_K, kSuperBlock) X(Q8_K, BlockQ8_K, kSuperBlock)   \
  X(IQ4_XS, BlockIQ4_XS, kSuperBlock)
// And the element types stored whole: (DType, bytes an element).
#define FLASHSERVE_FLOAT_TYPES(X) X(F32, 4) X(F16, 2) X(BF16, 2) X(F8_E4M3, 1)

// f.template operator()<Block, kElems>() for a block type t; false (f not called) for a float type.
template <class F>
bool with_block(DType t, F&& f) {
  switch (t) {
#define FLASHSERVE_WITH_BLOCK(type, block, elems) \
  case DType::type: f.template operator()<block, elems>(); return true;
    FLASHSERVE_BLOCK_TYPES(FLASHSERVE_WITH_BLOCK)
#undef FLASHSERVE_WITH_BLOCK
    default: return false;
  }
}
// The non-linear 4-bit codebook of IQ4_NL and IQ4_XS.
constexpr int8_t kIQ4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// nullopt for a GGML type id we do not support.
std::optional<DType> dtype_from_ggml(uint32_t ggml_type);
std::string_view dtype_name(DType t);
int64_t block_elems(DType t);   // 1 for F32/F16/BF16, 32 or 256 for quantized types
int64_t block_bytes(DType t);
// Bytes of a row of n elements; n must be a multiple of block_elems(t).
size_t row_bytes(DType t, int64_t n);

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even
float fp8_e4m3_to_fp32(uint8_t x);
// Round to nearest even; beyond +-448 (infinities too) saturates to +-448, as CUDA's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); NaN gives 0x7f.
uint8_t fp32_to_fp8_e4m3(float f);

// n must be a multiple of block_elems(t).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Reference quantizers (round to nearest), used to build test models and by tests.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace flashserve::kernels
