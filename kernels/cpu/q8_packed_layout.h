// The layout pack_rows_for_q8 writes and matmul_q8_packed reads (kernels/matmul.h): rows taken
// eight at a time, and for each 32-element block of those eight rows, in this order: the eight
// scales (f16), the eight minimums (f16, Q4_1 only), then each row's code bytes as the block
// stores them. A group of eight rows takes exactly the bytes of eight rows of the file.
#pragma once
#include <cstddef>

#include "kernels/dtype.h"

namespace flashserve::kernels::q8_packed {

constexpr int kRows = 8;

template <class Block>
struct Layout;
template <>
struct Layout<BlockQ4_0> {
  static constexpr bool kMin = false;
  static constexpr int kCodeBytes = 16;
};
template <>
struct Layout<BlockQ4_1> {
  static constexpr bool kMin = true;
  static constexpr int kCodeBytes = 16;
};
template <>
struct Layout<BlockQ8_0> {
  static constexpr bool kMin = false;
  static constexpr int kCodeBytes = 32;
};

template <class Block>
constexpr size_t kMinAt = 2 * kRows;
template <class Block>
constexpr size_t kCodesAt = (Layout<Block>::kMin ? 4 : 2) * kRows;
template <class Block>
constexpr size_t kGroupBlock = kCodesAt<Block> + kRows * Layout<Block>::kCodeBytes;

static_assert(kGroupBlock<BlockQ4_0> == kRows * sizeof(BlockQ4_0));
static_assert(kGroupBlock<BlockQ4_1> == kRows * sizeof(BlockQ4_1));
static_assert(kGroupBlock<BlockQ8_0> == kRows * sizeof(BlockQ8_0));

}  // namespace flashserve::kernels::q8_packed
