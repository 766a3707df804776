#include "kernels/dtype.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/block_codec.h"

namespace flashserve::kernels {

std::optional<DType> dtype_from_ggml(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0: return DType::F32;
    case 1: return DType::F16;
    case 2: return DType::Q4_0;
    case 3: return DType::Q4_1;
    case 8: return DType::Q8_0;
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
    case DType::Q8_0: return "Q8_0";
    case DType::BF16: return "BF16";
  }
  return "?";
}

int64_t block_elems(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q8_0: return kQuantBlock;
    default: return 1;
  }
}

int64_t block_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Q4_0: return sizeof(BlockQ4_0);
    case DType::Q4_1: return sizeof(BlockQ4_1);
    case DType::Q8_0: return sizeof(BlockQ8_0);
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

template <class Block>
void dequantize_blocks(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const Block*>(src);
  for (int64_t b = 0; b < n / kQuantBlock; ++b) codec::decode_block(blocks[b], dst + b * kQuantBlock);
}

// The quantizers below follow ggml's *_ref functions, including their truncating "+ 0.5" rounding
// and the use of the unrounded f32 scale, so files we write match what llama.cpp would write.
void quantize_q4_0(const float* x, BlockQ4_0& y) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) { amax = std::fabs(x[j]); max = x[j]; }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = codec::float_to_half(d);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, int(int8_t(x[j] * id + 8.5f)));
    const int hi = std::min(15, int(int8_t(x[j + 16] * id + 8.5f)));
    y.qs[j] = uint8_t(lo | (hi << 4));
  }
}

void quantize_q4_1(const float* x, BlockQ4_1& y) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < 32; ++j) { min = std::min(min, x[j]); max = std::max(max, x[j]); }
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = codec::float_to_half(d);
  y.m = codec::float_to_half(min);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, int(int8_t((x[j] - min) * id + 0.5f)));
    const int hi = std::min(15, int(int8_t((x[j + 16] - min) * id + 0.5f)));
    y.qs[j] = uint8_t(lo | (hi << 4));
  }
}

void quantize_q8_0(const float* x, BlockQ8_0& y) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  y.d = codec::float_to_half(d);
  for (int j = 0; j < 32; ++j) y.qs[j] = int8_t(std::round(x[j] * id));
}

template <class Block, void (*Quantize)(const float*, Block&)>
void quantize_blocks(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<Block*>(dst);
  for (int64_t b = 0; b < n / kQuantBlock; ++b) Quantize(src + b * kQuantBlock, blocks[b]);
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  check_multiple(t, n);
  const auto* h = static_cast<const uint16_t*>(src);
  switch (t) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::F16: for (int64_t i = 0; i < n; ++i) dst[i] = codec::half_to_float(h[i]); return;
    case DType::BF16: for (int64_t i = 0; i < n; ++i) dst[i] = codec::bf16_to_float(h[i]); return;
    case DType::Q4_0: dequantize_blocks<BlockQ4_0>(src, dst, n); return;
    case DType::Q4_1: dequantize_blocks<BlockQ4_1>(src, dst, n); return;
    case DType::Q8_0: dequantize_blocks<BlockQ8_0>(src, dst, n); return;
  }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  check_multiple(t, n);
  auto* h = static_cast<uint16_t*>(dst);
  switch (t) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::F16: for (int64_t i = 0; i < n; ++i) h[i] = codec::float_to_half(src[i]); return;
    case DType::BF16: for (int64_t i = 0; i < n; ++i) h[i] = codec::float_to_bf16(src[i]); return;
    case DType::Q4_0: quantize_blocks<BlockQ4_0, quantize_q4_0>(src, dst, n); return;
    case DType::Q4_1: quantize_blocks<BlockQ4_1, quantize_q4_1>(src, dst, n); return;
    case DType::Q8_0: quantize_blocks<BlockQ8_0, quantize_q8_0>(src, dst, n); return;
  }
}

}  // namespace flashserve::kernels
