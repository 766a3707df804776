// Inputs for the quantized-format tests, built two ways: quantize_row over random floats (what our
// test models hold), and raw random bytes with finite scales, which reach every quant value and scale
// code, including the ones our round-to-nearest quantizer never writes.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dtype.h"
#include "tests/kernels/reference.h"

namespace flashserve::test {

// The formats added with the K-quants.
constexpr DType kNewQuantTypes[] = {DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::Q2_K, DType::Q3_K,
                                    DType::Q4_K, DType::Q5_K, DType::Q6_K,   DType::Q8_K, DType::IQ4_XS};

// Byte offsets of a block's f16 scale fields (Q8_K: of its f32 d).
inline std::vector<size_t> scale_offsets(DType t) {
  using namespace kernels;
  switch (t) {
    case DType::Q4_1: return {offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)};
    case DType::Q5_1: return {offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)};
    case DType::Q2_K: return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::Q3_K: return {offsetof(BlockQ3_K, d)};
    case DType::Q4_K: return {offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)};
    case DType::Q5_K: return {offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)};
    case DType::Q6_K: return {offsetof(BlockQ6_K, d)};
    default: return {0};  // d leads every other block
  }
}

// n_blocks blocks of random bytes whose scales are finite (any sign, subnormals included).
inline std::vector<uint8_t> random_blocks(std::mt19937& rng, DType t, int64_t n_blocks) {
  const size_t bb = size_t(kernels::block_bytes(t));
  std::vector<uint8_t> bytes(bb * size_t(n_blocks));
  std::uniform_int_distribution<uint32_t> bits;
  for (uint8_t& b : bytes) b = uint8_t(bits(rng));
  for (int64_t b = 0; b < n_blocks; ++b) {
    for (size_t off : scale_offsets(t)) {
      uint8_t* p = bytes.data() + size_t(b) * bb + off;
      if (t == DType::Q8_K) {
        // Magnitudes 2^-20..2^10: wide, yet d * 127 stays far from overflow.
        const float d = std::ldexp(1.0f + float(bits(rng) % 1024) / 1024.0f, int(bits(rng) % 31) - 20);
        const float sd = bits(rng) % 2 ? -d : d;
        std::memcpy(p, &sd, 4);
      } else {
        uint16_t h = uint16_t(bits(rng));
        if ((h & 0x7c00) == 0x7c00) h ^= 0x4000;  // inf/nan exponent -> a finite one
        std::memcpy(p, &h, 2);
      }
    }
  }
  return bytes;
}

// n_rows rows of k elements quantized from random floats; each row gets its own range and offset,
// and a few outliers, so scales and mins differ between rows and sub-blocks.
inline std::vector<uint8_t> quantized_rows(std::mt19937& rng, DType t, int64_t n_rows, int64_t k) {
  const size_t rb = kernels::row_bytes(t, k);
  std::vector<uint8_t> w(rb * size_t(n_rows));
  std::uniform_real_distribution<float> scale(0.05f, 2.0f), shift(-0.5f, 0.5f);
  for (int64_t o = 0; o < n_rows; ++o) {
    const float s = scale(rng), c = shift(rng);
    auto row = random_floats(rng, size_t(k), c - s, c + s);
    for (int64_t i = o % 53; i < k; i += 53) row[i] *= 4.0f;
    kernels::quantize_row(t, row.data(), w.data() + size_t(o) * rb, k);
  }
  return w;
}

}  // namespace flashserve::test
