// The gated activations of an MLP: the gate projection through a nonlinearity, times the up one.
#pragma once
#include <cstdint>

struct CUstream_st;  // cudaStream_t

namespace flashserve::kernels {

// out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)).   All [n]; out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// out[i] = gelu(gate[i]) * up[i] with the tanh approximation, Gemma's MLP:
// gelu(g) = 0.5 g (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))).   Aliasing as swiglu.
void geglu(const float* gate, const float* up, float* out, int64_t n);

namespace cuda {
void swiglu(const float* gate, const float* up, float* out, int64_t n, CUstream_st* stream);
void geglu(const float* gate, const float* up, float* out, int64_t n, CUstream_st* stream);
}  // namespace cuda

}  // namespace flashserve::kernels
