// pack_rows_for_q8 (kernels/matmul.h): done once per weight matrix when a CPU backend maps it, so
// plain code; q8_packed_layout.h describes the result.
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/q8_packed_layout.h"
#include "kernels/matmul.h"

namespace flashserve::kernels {
namespace {

using q8_packed::kRows;

// Calls pack(p, r, src) for each group of kRows rows, each block of `blocks` in them and each row r
// of the group, p being the group block's kPackedBlockBytes (zeroed first: rows past n_out stay zero,
// scale 0) and src row r's block in the file. Groups are split across the kernel threads, since a
// user waits for the load: the 1B-shaped Q4_K_M file loads in 0.8 s instead of 1.2 s on 2 cores.
template <class Block, class Pack>
void for_each_group_block(const Block* w, int64_t n_out, int64_t blocks, uint8_t* out, Pack pack) {
  struct Job {
    const Block* w;
    int64_t n_out, blocks;
    uint8_t* out;
    const Pack& pack;
  } job{w, n_out, blocks, out, pack};
  run_parallel(
      (n_out + kRows - 1) / kRows,
      [](void* ctx, int64_t begin, int64_t end) {
        const auto& j = *static_cast<const Job*>(ctx);
        constexpr size_t bytes = q8_packed::kPackedBlockBytes<Block>;
        for (int64_t g = begin; g < end; ++g) {
          for (int64_t b = 0; b < j.blocks; ++b) {
            uint8_t* p = j.out + size_t(g * j.blocks + b) * bytes;
            std::memset(p, 0, bytes);
            for (int r = 0; r < kRows && g * kRows + r < j.n_out; ++r) j.pack(p, r, j.w[(g * kRows + r) * j.blocks + b]);
          }
        }
      },
      &job, Split::Runs);
}

// Row r's 32 nibbles (code(e), e = 0..31) into a block's nibble vectors.
template <class Code>
void put_nibbles(uint8_t* vectors, int r, Code code) {
  for (int e = 0; e < 16; ++e) vectors[q8_packed::nibble_byte(r, e)] = uint8_t(code(e) | code(e + 16) << 4);
}

// Row r's fifth bits (bit(e), e = 0..31) into a block's vector of them.
template <class Bit>
void put_fifth_bits(uint8_t* vector, int r, Bit bit) {
  for (int e = 0; e < 32; ++e) vector[q8_packed::fifth_bit_byte(r, e)] |= uint8_t(bit(e) << q8_packed::q4k::high_bit(e));
}

// Row r's 32 two-bit codes (code(e), e = 0..31) into a chunk's crumb vectors.
template <class Code>
void put_crumbs(uint8_t* vectors, int r, Code code) {
  for (int e = 0; e < 32; ++e) vectors[q8_packed::crumb_byte(r, e)] |= uint8_t(code(e) << q8_packed::crumb_shift(e));
}

template <class Block>
void pack_groups(const Block* w, int64_t n_out, int64_t nb, uint8_t* out) {
  using L = q8_packed::Layout<Block>;
  for_each_group_block(w, n_out, nb, out, [](uint8_t* p, int r, const Block& src) {
    std::memcpy(p + 2 * r, &src.d, 2);
    if constexpr (L::kMin) std::memcpy(p + q8_packed::kMinAt<Block> + 2 * r, &src.m, 2);
    uint8_t* codes = p + q8_packed::kCodesAt<Block>;
    if constexpr (std::is_same_v<Block, BlockQ8_0>) {
      for (int e = 0; e < 32; ++e) codes[q8_packed::code_byte(r, e)] = uint8_t(src.qs[e]);
    } else {
      put_nibbles(codes, r, [&](int e) { return e < 16 ? src.qs[e] & 0x0f : src.qs[e - 16] >> 4; });
    }
    if constexpr (L::kHighBytes > 0) {
      uint32_t qh;
      std::memcpy(&qh, src.qh, 4);
      put_fifth_bits(p + q8_packed::kHighsAt<Block>, r, [&](int e) { return (qh >> e) & 1; });
    }
  });
}

// Q4_K, or Q5_K with its fifth bits.
template <class Block>
void pack_k_groups(const Block* w, int64_t n_out, int64_t nsb, uint8_t* out) {
  namespace q4k = q8_packed::q4k;
  for_each_group_block(w, n_out, nsb, out, [](uint8_t* p, int r, const Block& src) {
    std::memcpy(p + 2 * r, &src.d, 2);
    std::memcpy(p + q4k::kDminAt + 2 * r, &src.dmin, 2);
    for (int c = 0; c < 8; ++c) {
      const ScaleMin sm = k_scale_min(src.scales, c);
      p[q4k::kScalesAt + kRows * c + r] = uint8_t(sm.sc);
      p[q4k::kMinsAt + kRows * c + r] = uint8_t(sm.m);
      put_nibbles(p + q4k::codes_at<Block>(c), r,
                  [&](int e) { return (src.qs[32 * (c / 2) + e] >> (4 * (c % 2))) & 0x0f; });
      if constexpr (std::is_same_v<Block, BlockQ5_K>) {
        put_fifth_bits(p + q4k::highs_at(c), r, [&](int e) { return (src.qh[e] >> c) & 1; });
      }
    }
  });
}

void pack_q2k_groups(const BlockQ2_K* w, int64_t n_out, int64_t nsb, uint8_t* out) {
  namespace q2k = q8_packed::q2k;
  for_each_group_block(w, n_out, nsb, out, [](uint8_t* p, int r, const BlockQ2_K& src) {
    std::memcpy(p + 2 * r, &src.d, 2);
    std::memcpy(p + q2k::kDminAt + 2 * r, &src.dmin, 2);
    for (int i = 0; i < 16; ++i) p[q2k::kScalesAt + kRows * i + r] = src.scales[i];
    for (int c = 0; c < 8; ++c) {
      put_crumbs(p + q2k::kChunksAt + q8_packed::kChunkCrumbs * c, r,
                 [&](int e) { return (src.qs[32 * (c / 4) + e] >> (2 * (c % 4))) & 3; });
    }
  });
}

void pack_q3k_groups(const BlockQ3_K* w, int64_t n_out, int64_t nsb, uint8_t* out) {
  namespace q3k = q8_packed::q3k;
  for_each_group_block(w, n_out, nsb, out, [](uint8_t* p, int r, const BlockQ3_K& src) {
    std::memcpy(p + 2 * r, &src.d, 2);
    for (int i = 0; i < 16; ++i) p[q3k::kScalesAt + kRows * i + r] = uint8_t(int8_t(q3k_scale_code(src.scales, i)));
    for (int c = 0; c < 8; ++c) {
      uint8_t* chunk = p + q3k::kChunksAt + q3k::kChunkBytes * c;
      put_crumbs(chunk, r, [&](int e) { return (src.qs[32 * (c / 4) + e] >> (2 * (c % 4))) & 3; });
      put_fifth_bits(chunk + q8_packed::kChunkCrumbs, r, [&](int e) { return (src.hmask[e] >> c) & 1; });
    }
  });
}

void pack_q6k_groups(const BlockQ6_K* w, int64_t n_out, int64_t nsb, uint8_t* out) {
  namespace q6k = q8_packed::q6k;
  for_each_group_block(w, n_out, nsb, out, [](uint8_t* p, int r, const BlockQ6_K& src) {
    std::memcpy(p + 2 * r, &src.d, 2);
    for (int i = 0; i < 16; ++i) p[q6k::kScalesAt + kRows * i + r] = uint8_t(src.scales[i]);
    for (int c = 0; c < 8; ++c) {
      const int h = c / 4, q = c % 4;
      auto low = [&](int e) { return (src.ql[64 * h + 32 * (q % 2) + e] >> (4 * (q / 2))) & 0x0f; };
      uint8_t* chunk = p + q6k::kChunksAt + q6k::kChunkBytes * c;
      put_nibbles(chunk, r, low);
      for (int e = 0; e < 32; ++e) {
        const int high = (src.qh[32 * h + e] >> (2 * q)) & 3;
        chunk[q6k::kChunkLow + q6k::high_byte(r, e)] |= uint8_t(high << q6k::high_shift(e));
      }
    }
  });
}

void pack_iq4xs_groups(const BlockIQ4_XS* w, int64_t n_out, int64_t nsb, uint8_t* out) {
  namespace iq4xs = q8_packed::iq4xs;
  for_each_group_block(w, n_out, nsb, out, [](uint8_t* p, int r, const BlockIQ4_XS& src) {
    std::memcpy(p + 2 * r, &src.d, 2);
    for (int c = 0; c < 8; ++c) {
      p[iq4xs::kScalesAt + kRows * c + r] = uint8_t(int8_t(iq4xs_scale_code(src.scales_l[c / 2], src.scales_h, c)));
      const uint8_t* qs = src.qs + 16 * c;
      put_nibbles(p + iq4xs::kCodesAt + iq4xs::kChunkCodes * c, r,
                  [&](int e) { return e < 16 ? qs[e] & 0x0f : qs[e - 16] >> 4; });
    }
  });
}

}  // namespace

bool q8_packs(DType wtype) {
  return q8_packed::visit_packed(wtype, [](auto) {});
}

size_t q8_packed_bytes(DType wtype, int64_t n_out, int64_t k) {
  const int64_t groups = (n_out + q8_packed::kRows - 1) / q8_packed::kRows;
  size_t bytes = 0;
  q8_packed::visit_packed(wtype, [&](auto block) {
    using Block = decltype(block);
    bytes = size_t(groups * (k / block_elems(wtype))) * q8_packed::kPackedBlockBytes<Block>;
  });
  return bytes;
}

void pack_rows_for_q8(const void* w, DType wtype, int64_t n_out, int64_t k, void* out) {
  if (k % block_elems(wtype) != 0) {
    throw std::invalid_argument("pack_rows_for_q8: k=" + std::to_string(k) + " is not whole blocks");
  }
  const int64_t blocks = k / block_elems(wtype);
  auto* o = static_cast<uint8_t*>(out);
  const bool packed = q8_packed::visit_packed(wtype, [&](auto block) {
    using Block = decltype(block);
    const auto* rows = static_cast<const Block*>(w);
    if constexpr (std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ5_K>) {
      pack_k_groups(rows, n_out, blocks, o);
    } else if constexpr (std::is_same_v<Block, BlockQ2_K>) {
      pack_q2k_groups(rows, n_out, blocks, o);
    } else if constexpr (std::is_same_v<Block, BlockQ3_K>) {
      pack_q3k_groups(rows, n_out, blocks, o);
    } else if constexpr (std::is_same_v<Block, BlockQ6_K>) {
      pack_q6k_groups(rows, n_out, blocks, o);
    } else if constexpr (std::is_same_v<Block, BlockIQ4_XS>) {
      pack_iq4xs_groups(rows, n_out, blocks, o);
    } else {
      pack_groups(rows, n_out, blocks, o);
    }
  });
  if (!packed) throw std::invalid_argument("pack_rows_for_q8: " + std::string(dtype_name(wtype)) + " is not packed");
}

}  // namespace flashserve::kernels
