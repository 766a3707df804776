// Element types of weight tensors, with the block layouts GGUF stores them in.
// Quantized types pack a block of 32 elements with its scale; values are GGML's type ids so a
// GGUF tensor's type field maps directly.
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
  Q8_0 = 8,   // block: f16 d; 32 int8. x = d * q
  BF16 = 30,
};

// Nibble order in Q4 blocks: byte j holds element j (low nibble) and element j + 16 (high).
struct BlockQ4_0 { uint16_t d; uint8_t qs[16]; };
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[16]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[32]; };
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ8_0) == 34);

constexpr int64_t kQuantBlock = 32;

// nullopt for a GGML type id we do not support.
std::optional<DType> dtype_from_ggml(uint32_t ggml_type);
std::string_view dtype_name(DType t);
int64_t block_elems(DType t);   // 1 for F32/F16/BF16, 32 for quantized types
int64_t block_bytes(DType t);
// Bytes of a row of n elements; n must be a multiple of block_elems(t).
size_t row_bytes(DType t, int64_t n);

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even

// n must be a multiple of block_elems(t).
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// Reference quantizers (round to nearest), used to build test models and by tests.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace flashserve::kernels
