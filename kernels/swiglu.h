#pragma once
#include <cstdint>

struct CUstream_st;  // cudaStream_t

namespace flashserve::kernels {

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).   All [n]; out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

namespace cuda {
void swiglu(const float* gate, const float* up, float* out, int64_t n, CUstream_st* stream);
}  // namespace cuda

}  // namespace flashserve::kernels
