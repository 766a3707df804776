// The layout pack_rows_for_q8 writes and matmul_q8_packed reads (kernels/matmul.h): rows taken
// sixteen at a time, and for each 32-element block of those sixteen rows, in this order: their
// scales (f16), their minimums (f16, Q4_1 only), then the codes as 64-byte vectors in which bytes
// 4 r .. 4 r + 3 belong to row r. So one VNNI instruction multiplies four elements of all sixteen
// rows (AVX-512) or of eight (AVX2: either half of the vector) by the same four activations
// (broadcast), and each 32-bit lane of the result is one row's sum: no horizontal sums, and the
// rows come out in order. Nibble formats take four vectors per 32 elements: vector v holds row
// r's elements 4 v .. 4 v + 3 in the low nibbles of bytes 4 r .. 4 r + 3 and elements
// 16 + 4 v .. 16 + 4 v + 3 in their high nibbles (nibble_byte). Q8_0 takes eight: vector v holds
// elements 4 v .. 4 v + 3 (code_byte). A group takes exactly the bytes of its rows in the file.
//
// Q4_K (namespace q4k below) goes by super-block: per 256 elements of the rows, their d and
// dmin (f16), then per 32-element chunk the rows' 6-bit scales and minimums unpacked to bytes
// (so a vector of rows' chunk scales is one conversion and one multiply), then each chunk's nibble
// vectors: 4 bytes a row more than the file's 144. Q5_K follows each chunk's nibble vectors with a
// vector of its fifth bits, so that a chunk's bytes lie together (with the fifth bits after all the
// codes, on a 2-core Zen 4 (AVX2 alone), alternating in one run: 1B Q5_K_M decode 17.2-17.8 tokens/s, now 32-38;
// BM_MatmulPacked k:5632 1 token 169 -> 150 us, 64 tokens the same): the byte holding element e's
// nibble in a nibble vector, at the same place in this one, holds its fifth bit, at bit e % 16 / 4
// for e < 16 and 4 + e % 16 / 4 above (q4k::high_bit); again 4 bytes a row more than the file's 176.
//
// Q6_K (namespace q6k) likewise: per super-block of the rows, their d (f16), the sixteen
// 16-element scales of each row ([half][row], int8), then per chunk its codes' low four bits as
// nibble vectors and their high two bits in two vectors: vector v / 2 of them holds those of
// nibble vector v, bits 4 (v % 2) .. + 1 for the low nibble's element and the next two for the high
// one's (q6k::high_byte, high_shift). Exactly the file's 210 bytes a row.
//
// Q2_K (namespace q2k) and Q3_K (q3k) keep their 2-bit codes as crumb vectors, two a chunk: the
// first holds elements 0..15, the second 16..31, row r's element e at byte 4 r + e % 4, bits
// 2 (e % 16 / 4) (crumb_byte, crumb_shift). Q2_K: per super-block of the rows, their d and dmin
// (f16), the file's sixteen bytes of scale (low nibble) and minimum (high) ([half][row]), then
// each chunk's crumbs: exactly the file's 84 bytes a row. Q3_K: their d (f16), the sixteen
// 16-element scales less 32 ([half][row], int8), then per chunk its crumbs and a vector of its
// third bits, placed as Q5_K's fifth bits (the code is crumb + 4 * bit, its value that less 4): 4
// bytes a row more than the file's 110.
//
// IQ4_NL is Q4_0's block (its nibbles index kIQ4Values) and packs as Q4_0. Q5_0 and Q5_1 (what
// llama-quantize writes for rows not in whole 256s, as Qwen2.5-0.5B's 896-wide ones) pack as Q4_0
// and Q4_1 followed by a vector of fifth bits as Q5_K's. IQ4_XS (namespace
// iq4xs): per super-block of the rows, their d (f16), each chunk's 6-bit scale minus 32
// ([chunk][row], int8), then each chunk's nibble vectors: 2 bytes a row more than the file's 136.
#pragma once
#include <cstddef>
#include <type_traits>

#include "kernels/dtype.h"

namespace flashserve::kernels::q8_packed {

constexpr int kRows = 16;
constexpr size_t kVector = 4 * kRows;  // bytes of a code vector

// The 32-element formats: whether a block has a minimum (Q4_1, Q5_1), its bytes of codes (Q8_0's
// 32, the nibble formats' 16: IQ4_NL is Q4_0's block, its nibbles indexing kIQ4Values) and of
// fifth bits (Q5_0, Q5_1: a vector of them after the nibbles, as Q5_K's).
template <class Block>
struct Layout {
  static constexpr bool kMin = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>;
  static constexpr int kCodeBytes = std::is_same_v<Block, BlockQ8_0> ? 32 : 16;
  static constexpr int kHighBytes = std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1> ? 4 : 0;
};

template <class Block>
constexpr size_t kMinAt = 2 * kRows;
template <class Block>
constexpr size_t kCodesAt = (Layout<Block>::kMin ? 4 : 2) * kRows;
template <class Block>
constexpr size_t kHighsAt = kCodesAt<Block> + kRows * Layout<Block>::kCodeBytes;
// Where row r's element e (0..31) goes in a block's nibble vectors (the low nibble for e < 16,
// the high one above), or in Q8_0's code vectors.
constexpr size_t nibble_byte(int r, int e) { return kVector * size_t(e % 16 / 4) + 4 * size_t(r) + size_t(e % 4); }
constexpr size_t code_byte(int r, int e) { return kVector * size_t(e / 4) + 4 * size_t(r) + size_t(e % 4); }
// Q5_0, Q5_1 and Q5_K: where element e's fifth bit goes in its vector of them (q4k::high_bit: which
// bit of that byte).
constexpr size_t fifth_bit_byte(int r, int e) { return nibble_byte(r, e) % kVector; }

template <class Block>
constexpr size_t kGroupBlock = kHighsAt<Block> + kRows * Layout<Block>::kHighBytes;

static_assert(kGroupBlock<BlockQ4_0> == kRows * sizeof(BlockQ4_0));
static_assert(kGroupBlock<BlockQ4_1> == kRows * sizeof(BlockQ4_1));
static_assert(kGroupBlock<BlockQ5_0> == kRows * sizeof(BlockQ5_0));
static_assert(kGroupBlock<BlockQ5_1> == kRows * sizeof(BlockQ5_1));
static_assert(kGroupBlock<BlockQ8_0> == kRows * sizeof(BlockQ8_0));
static_assert(kGroupBlock<BlockIQ4_NL> == kRows * sizeof(BlockIQ4_NL));

namespace q4k {
constexpr size_t kDminAt = 2 * kRows;
constexpr size_t kScalesAt = 4 * kRows;                   // [chunk][row]
constexpr size_t kMinsAt = kScalesAt + 8 * kRows;         // [chunk][row]
constexpr size_t kCodesAt = kMinsAt + 8 * kRows;          // [chunk], its nibble vectors
constexpr size_t kChunkCodes = kRows * 16;
constexpr size_t kGroupSuperBlock = kCodesAt + 8 * kChunkCodes;
static_assert(kGroupSuperBlock == kRows * (sizeof(BlockQ4_K) + 4));
// Q5_K: each chunk's nibble vectors, then its fifth bits.
constexpr size_t kChunkHighs = kRows * 4;
constexpr size_t kQ5ChunkBytes = kChunkCodes + kChunkHighs;
constexpr size_t kQ5GroupSuperBlock = kCodesAt + 8 * kQ5ChunkBytes;
static_assert(kQ5GroupSuperBlock == kRows * (sizeof(BlockQ5_K) + 4));
// Where chunk c's nibble vectors start in a Q4_K or Q5_K super-block, and where Q5_K's fifth bits do.
template <class Block>
constexpr size_t codes_at(int c) {
  return kCodesAt + (std::is_same_v<Block, BlockQ5_K> ? kQ5ChunkBytes : kChunkCodes) * size_t(c);
}
constexpr size_t highs_at(int c) { return codes_at<BlockQ5_K>(c) + kChunkCodes; }
constexpr int high_bit(int e) { return e % 16 / 4 + 4 * (e / 16); }
}  // namespace q4k

namespace q6k {
constexpr size_t kScalesAt = 2 * kRows;                   // [half of 16 elements][row]
constexpr size_t kChunksAt = kScalesAt + 16 * kRows;
constexpr size_t kChunkLow = kRows * 16;                  // the nibble vectors
constexpr size_t kChunkHigh = kRows * 8;
constexpr size_t kChunkBytes = kChunkLow + kChunkHigh;
constexpr size_t kGroupSuperBlock = kChunksAt + 8 * kChunkBytes;
static_assert(kGroupSuperBlock == kRows * sizeof(BlockQ6_K));
// Where row r's element e's high two bits go within a chunk's kChunkHigh, and their shift.
constexpr size_t high_byte(int r, int e) { return kVector * size_t(e % 16 / 8) + 4 * size_t(r) + size_t(e % 4); }
constexpr int high_shift(int e) { return 4 * (e % 16 / 4 % 2) + 2 * (e / 16); }
}  // namespace q6k

// Q2_K and Q3_K: where row r's element e goes in a chunk's crumb vectors, and its shift.
constexpr size_t crumb_byte(int r, int e) { return kVector * size_t(e / 16) + 4 * size_t(r) + size_t(e % 4); }
constexpr int crumb_shift(int e) { return 2 * (e % 16 / 4); }
constexpr size_t kChunkCrumbs = 2 * kVector;

namespace q2k {
constexpr size_t kDminAt = 2 * kRows;
constexpr size_t kScalesAt = 4 * kRows;  // [half of 16 elements][row]: scale | minimum << 4
constexpr size_t kChunksAt = kScalesAt + 16 * kRows;
constexpr size_t kGroupSuperBlock = kChunksAt + 8 * kChunkCrumbs;
static_assert(kGroupSuperBlock == kRows * sizeof(BlockQ2_K));
}  // namespace q2k

namespace q3k {
constexpr size_t kScalesAt = 2 * kRows;  // [half of 16 elements][row]
constexpr size_t kChunksAt = kScalesAt + 16 * kRows;
constexpr size_t kChunkBytes = kChunkCrumbs + kVector;  // the crumbs, then the third bits
constexpr size_t kGroupSuperBlock = kChunksAt + 8 * kChunkBytes;
static_assert(kGroupSuperBlock == kRows * (sizeof(BlockQ3_K) + 4));
}  // namespace q3k

namespace iq4xs {
constexpr size_t kScalesAt = 2 * kRows;  // [chunk][row]
constexpr size_t kCodesAt = kScalesAt + 8 * kRows;
constexpr size_t kChunkCodes = kRows * 16;
constexpr size_t kGroupSuperBlock = kCodesAt + 8 * kChunkCodes;
static_assert(kGroupSuperBlock == kRows * (sizeof(BlockIQ4_XS) + 2));
}  // namespace iq4xs

// What a group of rows takes per block of the file (32 elements, or a super-block of 256), and
// how many 32-element chunks such a block holds.
template <class Block>
constexpr size_t kPackedBlockBytes = kGroupBlock<Block>;
template <>
inline constexpr size_t kPackedBlockBytes<BlockQ2_K> = q2k::kGroupSuperBlock;
template <>
inline constexpr size_t kPackedBlockBytes<BlockQ3_K> = q3k::kGroupSuperBlock;
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
inline constexpr int kChunksPerBlock<BlockQ2_K> = 8;
template <>
inline constexpr int kChunksPerBlock<BlockQ3_K> = 8;
template <>
inline constexpr int kChunksPerBlock<BlockQ4_K> = 8;
template <>
inline constexpr int kChunksPerBlock<BlockQ5_K> = 8;
template <>
inline constexpr int kChunksPerBlock<BlockQ6_K> = 8;
template <>
inline constexpr int kChunksPerBlock<BlockIQ4_XS> = 8;

// Calls f(block) with a value of the file's block type of a packed format (every block type but
// Q8_K, which only activations use); false if wtype is not one.
template <class F>
bool visit_packed(DType wtype, F f) {
  bool packed = false;
  with_block(wtype, [&]<class B, int64_t>() {
    if constexpr (!std::is_same_v<B, BlockQ8_K>) packed = true, f(B{});
  });
  return packed;
}

}  // namespace flashserve::kernels::q8_packed
