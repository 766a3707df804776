// Rotary position embedding. GGML's "normal" layout rotates adjacent pairs (x[2i], x[2i+1]) (GGUF
// Llama files permute Q/K rows at conversion so that this layout is the right one); the "neox"
// layout, which Qwen and Gemma files keep, rotates halves: pair i is (x[i], x[i + rot_dim/2]).
#pragma once
#include <cstdint>

struct CUstream_st;  // cudaStream_t

namespace flashserve::kernels {

struct RopeParams {
  int32_t rot_dim = 0;                 // leading dims of each head that rotate (even, <= head_dim)
  float theta_base = 10000.0f;
  float freq_scale = 1.0f;             // linear scaling: angle = pos * freq_scale * theta_i
  const float* freq_factors = nullptr; // optional [rot_dim / 2]: theta_i divided by factor i (llama3)
  bool neox = false;                   // pair i is (i, i + rot_dim / 2) instead of (2i, 2i + 1)
};

// theta_i = theta_base^(-2i / rot_dim); pair i of a head rotated by angle pos * freq_scale * theta_i.
// x: [num_tokens][num_heads][head_dim], rotated in place; positions: [num_tokens].
void rope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
          const RopeParams& p);

namespace cuda {
// The same contract on device pointers (positions and p.freq_factors too), angles computed in the
// kernel rather than read from a table. Queued on `stream` (CUDA builds only).
void rope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
          const RopeParams& p, CUstream_st* stream);
}  // namespace cuda

}  // namespace flashserve::kernels
