// The layout pack_rows_for_q8 writes and matmul_q8_packed reads (kernels/matmul.h): rows taken
// eight at a time, and for each 32-element block of those eight rows, in this order: the eight
// scales (f16), the eight minimums (f16, Q4_1 only), then the code bytes as 32-byte vectors, each
// holding 16 bytes of row i (i = 0..3) then the same 16 bytes of row i + 4: for the nibble formats
// one vector per i (the block's 16 bytes of nibbles), for Q8_0 two (elements 0-15, then 16-31). So
// one vector's sums come out as row i's in its low 128 bits and row i + 4's in its high ones, which
// is how q8::quad_sums lays eight rows out in order. A group of eight rows takes exactly the bytes
// of eight rows of the file.
//
// Q4_K (namespace q4k below) goes by super-block: per 256 elements of the eight rows, their d and
// dmin (f16), then per 32-element chunk the eight rows' 6-bit scales and minimums unpacked to bytes
// (so eight rows' chunk scales are one conversion and one multiply), then each chunk's codes as
// Q4_0's: byte j of a row holds element j in its low nibble and j + 16 in its high one. 1,184 bytes
// where eight rows of the file take 1,152. Q5_K adds each chunk's fifth bits after all the codes:
// 4 bytes a row (byte j bit b: element 8 j + b), row i's then row i + 4's for i = 0..3; 1,440 bytes
// where eight rows take 1,408.
//
// Q6_K (namespace q6k) likewise: per super-block of the eight rows, their d (f16), the sixteen
// 16-element scales of each row ([half][row], int8), then per chunk its codes' low four bits as
// Q4_0's nibbles and their high two bits, 8 bytes a row (byte j: elements j, j + 8, j + 16, j + 24
// at bits 0, 2, 4, 6), row i's then row i + 4's for i = 0..3. 1,680 bytes: what eight rows of the
// file take.
//
// IQ4_NL is Q4_0's block (its nibbles index kIQ4Values) and packs as Q4_0. IQ4_XS (namespace
// iq4xs): per super-block of the eight rows, their d (f16), each chunk's 6-bit scale minus 32
// ([chunk][row], int8), then each chunk's nibbles as Q4_0's. 1,104 bytes where eight rows take 1,088.
#pragma once
#include <cstddef>
#include <type_traits>

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
struct Layout<BlockIQ4_NL> {  // Q4_0's block, its nibbles indexing kIQ4Values
  static constexpr bool kMin = false;
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
// Where bytes 16 p .. 16 p + 15 of row r's codes go, from the start of the codes.
template <class Block>
constexpr size_t code_offset(int r, int p) {
  return 32 * size_t(Layout<Block>::kCodeBytes / 16 * (r % 4) + p) + 16 * size_t(r / 4);
}

template <class Block>
constexpr size_t kGroupBlock = kCodesAt<Block> + kRows * Layout<Block>::kCodeBytes;

static_assert(kGroupBlock<BlockQ4_0> == kRows * sizeof(BlockQ4_0));
static_assert(kGroupBlock<BlockQ4_1> == kRows * sizeof(BlockQ4_1));
static_assert(kGroupBlock<BlockQ8_0> == kRows * sizeof(BlockQ8_0));
static_assert(kGroupBlock<BlockIQ4_NL> == kRows * sizeof(BlockIQ4_NL));

namespace q4k {
constexpr size_t kDminAt = 2 * kRows;
constexpr size_t kScalesAt = 4 * kRows;                   // [chunk][row]
constexpr size_t kMinsAt = kScalesAt + 8 * kRows;         // [chunk][row]
constexpr size_t kCodesAt = kMinsAt + 8 * kRows;          // [chunk], each as a Q4_0 group block's codes
constexpr size_t kChunkCodes = kRows * 16;
constexpr size_t kGroupSuperBlock = kCodesAt + 8 * kChunkCodes;
static_assert(kGroupSuperBlock == 1184);
// Q5_K: the same, then the fifth bits.
constexpr size_t kHighsAt = kGroupSuperBlock;
constexpr size_t kChunkHighs = kRows * 4;
constexpr size_t kQ5GroupSuperBlock = kHighsAt + 8 * kChunkHighs;
constexpr size_t high_offset(int r) { return 8 * size_t(r % 4) + 4 * size_t(r / 4); }
}  // namespace q4k

namespace q6k {
constexpr size_t kScalesAt = 2 * kRows;                   // [half of 16 elements][row]
constexpr size_t kChunksAt = kScalesAt + 16 * kRows;
constexpr size_t kChunkLow = kRows * 16;                  // the nibbles, as Q4_0's codes
constexpr size_t kChunkHigh = kRows * 8;
constexpr size_t kChunkBytes = kChunkLow + kChunkHigh;
constexpr size_t kGroupSuperBlock = kChunksAt + 8 * kChunkBytes;
static_assert(kGroupSuperBlock == kRows * sizeof(BlockQ6_K));
// Where row r's 8 bytes of high bits go within a chunk's kChunkHigh.
constexpr size_t high_offset(int r) { return 16 * size_t(r % 4) + 8 * size_t(r / 4); }
}  // namespace q6k

namespace iq4xs {
constexpr size_t kScalesAt = 2 * kRows;  // [chunk][row]
constexpr size_t kCodesAt = kScalesAt + 8 * kRows;
constexpr size_t kChunkCodes = kRows * 16;
constexpr size_t kGroupSuperBlock = kCodesAt + 8 * kChunkCodes;
static_assert(kGroupSuperBlock == 1104);
}  // namespace iq4xs

// What a group of eight rows takes per block of the file (32 elements, or a super-block of 256), and
// how many 32-element chunks such a block holds.
template <class Block>
constexpr size_t kPackedBlockBytes = kGroupBlock<Block>;
template <>
inline constexpr size_t kPackedBlockBytes<BlockQ4_K> = q4k::kGroupSuperBlock;
template <>
inline constexpr size_t kPackedBlockBytes<BlockQ5_K> = q4k::kQ5GroupSuperBlock;
template <>
inline constexpr size_t kPackedBlockBytes<BlockQ6_K> = q6k::kGroupSuperBlock;
template <>
inline constexpr size_t kPackedBlockBytes<BlockIQ4_XS> = iq4xs::kGroupSuperBlock;
template <class Block>
constexpr int kChunksPerBlock = 1;
template <>
inline constexpr int kChunksPerBlock<BlockQ4_K> = 8;
template <>
inline constexpr int kChunksPerBlock<BlockQ5_K> = 8;
template <>
inline constexpr int kChunksPerBlock<BlockQ6_K> = 8;
template <>
inline constexpr int kChunksPerBlock<BlockIQ4_XS> = 8;

}  // namespace flashserve::kernels::q8_packed
