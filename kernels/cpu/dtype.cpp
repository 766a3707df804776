#include "kernels/dtype.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/kquant_codec.h"
#include "kernels/cpu/quantize_blocks.h"

namespace flashserve::kernels {
namespace codec = FLASHSERVE_ISA::codec;  // the scalar copy's decoders (built with these flags)

// The enum's values are GGML's ids, but for F8_E4M3, which no model file holds.
std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  if (DType(ggml_type) == DType::F8_E4M3) return std::nullopt;
  switch (DType(ggml_type)) {
#define FLASHSERVE_KNOWN_FLOAT(type, bytes) case DType::type:
#define FLASHSERVE_KNOWN_BLOCK(type, block, elems) case DType::type:
    FLASHSERVE_FLOAT_TYPES(FLASHSERVE_KNOWN_FLOAT)
    FLASHSERVE_BLOCK_TYPES(FLASHSERVE_KNOWN_BLOCK)
#undef FLASHSERVE_KNOWN_FLOAT
#undef FLASHSERVE_KNOWN_BLOCK
      return DType(ggml_type);
  }
  return std::nullopt;
}

std::string_view dtype_name(DType t) {
  switch (t) {
#define FLASHSERVE_FLOAT_NAME(type, bytes) case DType::type: return #type;
#define FLASHSERVE_BLOCK_NAME(type, block, elems) case DType::type: return #type;
    FLASHSERVE_FLOAT_TYPES(FLASHSERVE_FLOAT_NAME)
    FLASHSERVE_BLOCK_TYPES(FLASHSERVE_BLOCK_NAME)
#undef FLASHSERVE_FLOAT_NAME
#undef FLASHSERVE_BLOCK_NAME
  }
  return "?";
}

int64_t block_elems(DType t) {
  switch (t) {
#define FLASHSERVE_FLOAT_ELEMS(type, bytes) case DType::type: return 1;
#define FLASHSERVE_BLOCK_ELEMS(type, block, elems) case DType::type: return elems;
    FLASHSERVE_FLOAT_TYPES(FLASHSERVE_FLOAT_ELEMS)
    FLASHSERVE_BLOCK_TYPES(FLASHSERVE_BLOCK_ELEMS)
#undef FLASHSERVE_FLOAT_ELEMS
#undef FLASHSERVE_BLOCK_ELEMS
  }
  return 1;
}

int64_t block_bytes(DType t) {
  switch (t) {
#define FLASHSERVE_FLOAT_BYTES(type, bytes) case DType::type: return bytes;
#define FLASHSERVE_BLOCK_BYTES(type, block, elems) case DType::type: return sizeof(block);
    FLASHSERVE_FLOAT_TYPES(FLASHSERVE_FLOAT_BYTES)
    FLASHSERVE_BLOCK_TYPES(FLASHSERVE_BLOCK_BYTES)
#undef FLASHSERVE_FLOAT_BYTES
#undef FLASHSERVE_BLOCK_BYTES
  }
  return 0;
}

size_t row_bytes(DType t, int64_t n) { return size_t(n / block_elems(t) * block_bytes(t)); }

float fp16_to_fp32(uint16_t h) { return codec::half_to_float(h); }
uint16_t fp32_to_fp16(float f) { return codec::float_to_half(f); }
float bf16_to_fp32(uint16_t h) { return codec::bf16_to_float(h); }
uint16_t fp32_to_bf16(float f) { return codec::float_to_bf16(f); }
float fp8_e4m3_to_fp32(uint8_t x) { return codec::e4m3_to_float(x); }
uint8_t fp32_to_fp8_e4m3(float f) { return codec::float_to_e4m3(f); }

namespace {

void check_multiple(DType t, int64_t n) {
  if (n % block_elems(t) != 0)
    throw std::invalid_argument("row of " + std::to_string(n) + " elements is not whole blocks of " +
                                std::string(dtype_name(t)));
}

// Dispatches a row to the per-block codec: 32-element blocks decode whole, super-blocks by chunk.
template <class Block, int64_t kElems>
void dequantize_blocks(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const Block*>(src);
  for (int64_t b = 0; b < n / kElems; ++b) {
    float* out = dst + b * kElems;
    if constexpr (kElems == kQuantBlock) {
      codec::decode_block(blocks[b], out);
    } else {
      for (int c = 0; c < codec::kChunks; ++c) codec::decode_chunk(blocks[b], c, out + c * codec::kChunk);
    }
  }
}

template <class Block, int64_t kElems>
void quantize_blocks(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<Block*>(dst);
  for (int64_t b = 0; b < n / kElems; ++b) codec::quantize_block(src + b * kElems, blocks[b]);
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  check_multiple(t, n);
  if (with_block(t, [&]<class B, int64_t kElems>() { dequantize_blocks<B, kElems>(src, dst, n); })) return;
  const auto* h = static_cast<const uint16_t*>(src);
  switch (t) {
    case DType::F16: for (int64_t i = 0; i < n; ++i) dst[i] = codec::half_to_float(h[i]); return;
    case DType::BF16: for (int64_t i = 0; i < n; ++i) dst[i] = codec::bf16_to_float(h[i]); return;
    case DType::F8_E4M3:
      for (int64_t i = 0; i < n; ++i) dst[i] = codec::e4m3_to_float(static_cast<const uint8_t*>(src)[i]);
      return;
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    default: return;  // a block type: with_block ran it
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  check_multiple(t, n);
  if (with_block(t, [&]<class B, int64_t kElems>() { quantize_blocks<B, kElems>(src, dst, n); })) return;
  auto* h = static_cast<uint16_t*>(dst);
  switch (t) {
    case DType::F16: for (int64_t i = 0; i < n; ++i) h[i] = codec::float_to_half(src[i]); return;
    case DType::BF16: for (int64_t i = 0; i < n; ++i) h[i] = codec::float_to_bf16(src[i]); return;
    case DType::F8_E4M3:
      for (int64_t i = 0; i < n; ++i) static_cast<uint8_t*>(dst)[i] = codec::float_to_e4m3(src[i]);
      return;
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    default: return;  // a block type: with_block ran it
  }
}

}  // namespace flashserve::kernels
