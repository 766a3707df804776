// One thread per rotated pair of one token, applied to a group of heads: the angle depends only on
// (position, pair), so computing it once per group of heads divides the fp64 work by the group size
// while a group's independent loads keep several requests in flight.
#include <algorithm>
#include <stdexcept>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/rope.h"

namespace flashserve::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kHeadsPerThread = 8;
// Enough blocks to fill any current GPU; larger problems loop (grid-stride).
constexpr int64_t kMaxBlocks = 1 << 16;

// In double, as the CPU twin does: near position 8192 an f32 angle resolves only ~5e-4 rad, and
// f32 range reduction of it would lose as much. Rounding the double cos/sin to float then gives
// the CPU's values (bar a rare double-rounding tie), so the two backends agree to ~1e-7.
__device__ void pair_cos_sin(int32_t pos, int64_t pair, const RopeParams& p, float& c, float& s) {
  double freq = double(p.freq_scale) * pow(double(p.theta_base), -2.0 * double(pair) / double(p.rot_dim));
  if (p.freq_factors) freq /= double(p.freq_factors[pair]);
  double sd, cd;
  sincos(double(pos) * freq, &sd, &cd);
  c = float(cd);
  s = float(sd);
}

__global__ void rope_kernel(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads,
                            int64_t head_dim, RopeParams p) {
  const int64_t pairs = p.rot_dim / 2;
  const int64_t partner = p.neox ? pairs : 1;  // offset of a pair's second element from its first
  const int64_t groups = (num_heads + kHeadsPerThread - 1) / kHeadsPerThread;
  const int64_t total = num_tokens * groups * pairs;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    // pair fastest, so neighbouring threads touch neighbouring pairs of the same head.
    const int64_t pair = idx % pairs;
    const int64_t group = (idx / pairs) % groups;
    const int64_t token = idx / (pairs * groups);
    float c, s;
    pair_cos_sin(positions[token], pair, p, c, s);
    float* v[kHeadsPerThread];
    float x0[kHeadsPerThread], x1[kHeadsPerThread];
    const int64_t heads = min(int64_t(kHeadsPerThread), num_heads - group * kHeadsPerThread);
    // All loads before any store: the compiler cannot prove the heads' addresses distinct, so
    // interleaving would serialize one memory round trip per head.
#pragma unroll
    for (int j = 0; j < kHeadsPerThread; ++j) {
      if (j >= heads) break;
      v[j] = x + (token * num_heads + group * kHeadsPerThread + j) * head_dim + (p.neox ? pair : 2 * pair);
      x0[j] = v[j][0];
      x1[j] = v[j][partner];
    }
#pragma unroll
    for (int j = 0; j < kHeadsPerThread; ++j) {
      if (j >= heads) break;
      v[j][0] = x0[j] * c - x1[j] * s;
      v[j][partner] = x0[j] * s + x1[j] * c;
    }
  }
}

}  // namespace

void rope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
          const RopeParams& p, CUstream_st* stream) {
  if (num_tokens < 0 || num_heads < 0 || head_dim < 0) throw std::invalid_argument("cuda::rope: negative shape");
  if (p.rot_dim < 0 || p.rot_dim % 2 != 0 || p.rot_dim > head_dim)
    throw std::invalid_argument("cuda::rope: rot_dim must be even and within head_dim");
  const int64_t pairs = p.rot_dim / 2;
  const int64_t total = num_tokens * ((num_heads + kHeadsPerThread - 1) / kHeadsPerThread) * pairs;
  if (total == 0) return;
  const int64_t blocks = std::min((total + kThreads - 1) / kThreads, kMaxBlocks);
  FLASHSERVE_LAUNCH(unsigned(blocks), kThreads, 0, stream, rope_kernel)(
      x, positions, num_tokens, num_heads, head_dim, p);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace flashserve::kernels::cuda
