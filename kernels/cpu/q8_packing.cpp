// pack_rows_for_q8 (kernels/matmul.h): done once per weight matrix when a CPU backend maps it, so
// plain code; q8_packed_layout.h describes the result.
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/q8_packed_layout.h"
#include "kernels/matmul.h"

namespace flashserve::kernels {
namespace {

template <class Block>
void pack_groups(const Block* w, int64_t n_out, int64_t nb, uint8_t* out) {
  using q8_packed::kRows;
  using L = q8_packed::Layout<Block>;
  for (int64_t g = 0; g * kRows < n_out; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* p = out + size_t(g * nb + b) * q8_packed::kGroupBlock<Block>;
      std::memset(p, 0, q8_packed::kGroupBlock<Block>);  // rows past n_out stay zero: scale 0
      for (int r = 0; r < kRows && g * kRows + r < n_out; ++r) {
        const Block& src = w[(g * kRows + r) * nb + b];
        std::memcpy(p + 2 * r, &src.d, 2);
        if constexpr (L::kMin) std::memcpy(p + q8_packed::kMinAt<Block> + 2 * r, &src.m, 2);
        for (int part = 0; part < L::kCodeBytes / 16; ++part) {
          std::memcpy(p + q8_packed::kCodesAt<Block> + q8_packed::code_offset<Block>(r, part), src.qs + 16 * part, 16);
        }
      }
    }
  }
}

}  // namespace

bool q8_packs(DType wtype) { return wtype == DType::Q4_0 || wtype == DType::Q4_1 || wtype == DType::Q8_0; }

size_t q8_packed_bytes(DType wtype, int64_t n_out, int64_t k) {
  const int64_t groups = (n_out + q8_packed::kRows - 1) / q8_packed::kRows;
  return size_t(groups * q8_packed::kRows) * row_bytes(wtype, k);
}

void pack_rows_for_q8(const void* w, DType wtype, int64_t n_out, int64_t k, void* out) {
  if (k % 32 != 0) throw std::invalid_argument("pack_rows_for_q8: k=" + std::to_string(k) + " is not whole blocks");
  const int64_t nb = k / 32;
  auto* o = static_cast<uint8_t*>(out);
  switch (wtype) {
    case DType::Q4_0: return pack_groups(static_cast<const BlockQ4_0*>(w), n_out, nb, o);
    case DType::Q4_1: return pack_groups(static_cast<const BlockQ4_1*>(w), n_out, nb, o);
    case DType::Q8_0: return pack_groups(static_cast<const BlockQ8_0*>(w), n_out, nb, o);
    default: throw std::invalid_argument("pack_rows_for_q8: " + std::string(dtype_name(wtype)) + " is not packed");
  }
}

}  // namespace flashserve::kernels
