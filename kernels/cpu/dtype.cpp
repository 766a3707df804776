#include "kernels/dtype.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/kquant_codec.h"
#include "kernels/cpu/quantize_blocks.h"

namespace flashserve::kernels {
namespace codec = FLASHSERVE_ISA::codec;  // the scalar copy's decoders (built with these flags)

std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0: return DType::F32;
    case 1: return DType::F16;
    case 2: return DType::Q4_0;
    case 3: return DType::Q4_1;
    case 6: return DType::Q5_0;
    case 7: return DType::Q5_1;
    case 8: return DType::Q8_0;
    case 10: return DType::Q2_K;
    case 11: return DType::Q3_K;
    case 12: return DType::Q4_K;
    case 13: return DType::Q5_K;
    case 14: return DType::Q6_K;
    case 15: return DType::Q8_K;
    case 20: return DType::IQ4_NL;
    case 23: return DType::IQ4_XS;
    case 30: return DType::BF16;
    default: return std::nullopt;
  }
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::Q4_0: return "Q4_0";
    case DType::Q4_1: return "Q4_1";
    case DType::Q5_0: return "Q5_0";
    case DType::Q5_1: return "Q5_1";
    case DType::Q8_0: return "Q8_0";
    case DType::Q2_K: return "Q2_K";
    case DType::Q3_K: return "Q3_K";
    case DType::Q4_K: return "Q4_K";
    case DType::Q5_K: return "Q5_K";
    case DType::Q6_K: return "Q6_K";
    case DType::Q8_K: return "Q8_K";
    case DType::IQ4_NL: return "IQ4_NL";
    case DType::IQ4_XS: return "IQ4_XS";
    case DType::BF16: return "BF16";
  }
  return "?";
}

int64_t block_elems(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return 1;
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::IQ4_NL: return kQuantBlock;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_K:
    case DType::IQ4_XS: return kSuperBlock;
  }
  return 1;
}

int64_t block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Q4_0: return sizeof(BlockQ4_0);
    case DType::Q4_1: return sizeof(BlockQ4_1);
    case DType::Q5_0: return sizeof(BlockQ5_0);
    case DType::Q5_1: return sizeof(BlockQ5_1);
    case DType::Q8_0: return sizeof(BlockQ8_0);
    case DType::IQ4_NL: return sizeof(BlockIQ4_NL);
    case DType::Q2_K: return sizeof(BlockQ2_K);
    case DType::Q3_K: return sizeof(BlockQ3_K);
    case DType::Q4_K: return sizeof(BlockQ4_K);
    case DType::Q5_K: return sizeof(BlockQ5_K);
    case DType::Q6_K: return sizeof(BlockQ6_K);
    case DType::Q8_K: return sizeof(BlockQ8_K);
    case DType::IQ4_XS: return sizeof(BlockIQ4_XS);
  }
  return 0;
}

size_t row_bytes(DType t, int64_t n) { return size_t(n / block_elems(t) * block_bytes(t)); }

float fp16_to_fp32(uint16_t h) { return codec::half_to_float(h); }
uint16_t fp32_to_fp16(float f) { return codec::float_to_half(f); }
float bf16_to_fp32(uint16_t h) { return codec::bf16_to_float(h); }
uint16_t fp32_to_bf16(float f) { return codec::float_to_bf16(f); }

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
  const auto* h = static_cast<const uint16_t*>(src);
  switch (t) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::F16: for (int64_t i = 0; i < n; ++i) dst[i] = codec::half_to_float(h[i]); return;
    case DType::BF16: for (int64_t i = 0; i < n; ++i) dst[i] = codec::bf16_to_float(h[i]); return;
    case DType::Q4_0: dequantize_blocks<BlockQ4_0, kQuantBlock>(src, dst, n); return;
    case DType::Q4_1: dequantize_blocks<BlockQ4_1, kQuantBlock>(src, dst, n); return;
    case DType::Q5_0: dequantize_blocks<BlockQ5_0, kQuantBlock>(src, dst, n); return;
    case DType::Q5_1: dequantize_blocks<BlockQ5_1, kQuantBlock>(src, dst, n); return;
    case DType::Q8_0: dequantize_blocks<BlockQ8_0, kQuantBlock>(src, dst, n); return;
    case DType::IQ4_NL: dequantize_blocks<BlockIQ4_NL, kQuantBlock>(src, dst, n); return;
    case DType::Q2_K: dequantize_blocks<BlockQ2_K, kSuperBlock>(src, dst, n); return;
    case DType::Q3_K: dequantize_blocks<BlockQ3_K, kSuperBlock>(src, dst, n); return;
    case DType::Q4_K: dequantize_blocks<BlockQ4_K, kSuperBlock>(src, dst, n); return;
    case DType::Q5_K: dequantize_blocks<BlockQ5_K, kSuperBlock>(src, dst, n); return;
    case DType::Q6_K: dequantize_blocks<BlockQ6_K, kSuperBlock>(src, dst, n); return;
    case DType::Q8_K: dequantize_blocks<BlockQ8_K, kSuperBlock>(src, dst, n); return;
    case DType::IQ4_XS: dequantize_blocks<BlockIQ4_XS, kSuperBlock>(src, dst, n); return;
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  check_multiple(t, n);
  auto* h = static_cast<uint16_t*>(dst);
  switch (t) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::F16: for (int64_t i = 0; i < n; ++i) h[i] = codec::float_to_half(src[i]); return;
    case DType::BF16: for (int64_t i = 0; i < n; ++i) h[i] = codec::float_to_bf16(src[i]); return;
    case DType::Q4_0: quantize_blocks<BlockQ4_0, kQuantBlock>(src, dst, n); return;
    case DType::Q4_1: quantize_blocks<BlockQ4_1, kQuantBlock>(src, dst, n); return;
    case DType::Q5_0: quantize_blocks<BlockQ5_0, kQuantBlock>(src, dst, n); return;
    case DType::Q5_1: quantize_blocks<BlockQ5_1, kQuantBlock>(src, dst, n); return;
    case DType::Q8_0: quantize_blocks<BlockQ8_0, kQuantBlock>(src, dst, n); return;
    case DType::IQ4_NL: quantize_blocks<BlockIQ4_NL, kQuantBlock>(src, dst, n); return;
    case DType::Q2_K: quantize_blocks<BlockQ2_K, kSuperBlock>(src, dst, n); return;
    case DType::Q3_K: quantize_blocks<BlockQ3_K, kSuperBlock>(src, dst, n); return;
    case DType::Q4_K: quantize_blocks<BlockQ4_K, kSuperBlock>(src, dst, n); return;
    case DType::Q5_K: quantize_blocks<BlockQ5_K, kSuperBlock>(src, dst, n); return;
    case DType::Q6_K: quantize_blocks<BlockQ6_K, kSuperBlock>(src, dst, n); return;
    case DType::Q8_K: quantize_blocks<BlockQ8_K, kSuperBlock>(src, dst, n); return;
    case DType::IQ4_XS: quantize_blocks<BlockIQ4_XS, kSuperBlock>(src, dst, n); return;
  }
}

}  // namespace flashserve::kernels
