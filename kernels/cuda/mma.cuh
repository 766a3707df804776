// One warp-wide tensor-core product, D = A B + C with A 16x16 and B 16x8 in f16 or bf16 and C, D
// 16x8 in f32 (PTX mma.sync.aligned.m16n8k16.row.col). Each lane holds pieces of every matrix, laid
// out as the PTX ISA's "Matrix Fragments for mma.m16n8k16" section says; with g = lane / 4 and
// t = lane % 4:
//   a[0]: A[g][2t, 2t+1]    a[1]: A[g+8][2t, 2t+1]    a[2]: A[g][2t+8, 2t+9]    a[3]: A[g+8][2t+8, 2t+9]
//   b[0]: B[2t, 2t+1][g]    b[1]: B[2t+8, 2t+9][g]
//   c[0], c[1]: C[g][2t, 2t+1]    c[2], c[3]: C[g+8][2t, 2t+1]
// Each 32-bit register packs two elements, the lower index in the low half. Under the host emulator
// the same layout is computed by cuda_emu, so a kernel's indexing is tested in CI.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace flashserve::kernels::cuda {

template <class T>
__device__ __forceinline__ void mma_16x8x16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>);
#ifdef FLASHSERVE_CUDA_EMULATION
  ::flashserve::cuda_emu::mma_16x8x16(std::is_same_v<T, __nv_bfloat16>, c, a, b);
#else
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

// Two floats rounded to nearest into one register of T elements, x in the low half.
template <class T>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  if constexpr (std::is_same_v<T, __half>) {
    return uint32_t(__half_as_ushort(__float2half_rn(x))) | (uint32_t(__half_as_ushort(__float2half_rn(y))) << 16);
  } else {
    return uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(x))) |
           (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(y))) << 16);
  }
}

}  // namespace flashserve::kernels::cuda
