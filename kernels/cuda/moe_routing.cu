// MoE routing in three kernels, with no atomics on global memory and nothing whose result depends
// on scheduling:
//   1. route: one warp per token (softmax, top_k by repeated warp argmax); each block owns a tile of
//      kTileTokens tokens and writes its tile's per-expert counts (a plain store of every entry, so
//      the workspace never needs zeroing and the op can be replayed in a CUDA graph).
//   2. scan (one block): per expert, the counts of earlier tiles (in place), and expert_offsets.
//   3. scatter: one block per tile places the tile's assignments, in assignment order, from where
//      its expert's earlier tiles left off: the same stable counting sort as the CPU twin.
// Work is linear in num_tokens * (num_experts + top_k); kernel 2 alone is serial, over tiles.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/moe_routing.h"

namespace flashserve::kernels::cuda {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kRouteThreads = 1024;
constexpr int kRouteWarps = kRouteThreads / 32;
constexpr int kTileTokens = 256;  // 8 tokens per routing warp
constexpr int kExpertsPerLane = kMoeMaxExperts / 32;
constexpr int kScanThreads = kMoeMaxExperts;  // one thread per expert
constexpr int kScanBatch = 16;                // tile counts loaded together, to overlap their latency
constexpr int kScatterThreads = 256;
constexpr int kScatterWarps = kScatterThreads / 32;
static_assert(kMoeMaxExperts % 32 == 0 && kExpertsPerLane <= 32, "taken-bit mask is one word per lane");

int64_t num_tiles(int64_t num_tokens) { return (num_tokens + kTileTokens - 1) / kTileTokens; }

// Routing order: higher logit first, lower expert id on ties. A strict total order (given no NaN),
// so a butterfly reduction leaves every lane with the same winner.
__device__ bool ranks_before(float a, int32_t a_id, float b, int32_t b_id) {
  return a > b || (a == b && a_id < b_id);
}

__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// The best (logit, id) over the warp; every lane returns it.
__device__ int32_t warp_argmax(float logit, int32_t id) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_xor_sync(kFullMask, logit, offset);
    const int32_t other_id = __shfl_xor_sync(kFullMask, id, offset);
    if (ranks_before(other, other_id, logit, id)) {
      logit = other;
      id = other_id;
    }
  }
  return id;
}

// One warp routes one token; lane l holds experts l, l + 32, ... Lane j ends up with choice j, writes
// it and counts it in the block's histogram.
__device__ void route_token(const float* row, int32_t num_experts, int32_t top_k, bool renormalize,
                            int32_t* ids, float* weights, int32_t* hist) {
  const int lane = threadIdx.x % 32;
  float logit[kExpertsPerLane], ex[kExpertsPerLane];  // ex: e^(logit - max), softmax before the division
  uint32_t taken = 0;  // bit s: expert lane + 32 s is already chosen, or does not exist
  float mx = -INFINITY;
#pragma unroll
  for (int s = 0; s < kExpertsPerLane; ++s) {
    const int32_t e = lane + 32 * s;
    const float v = e < num_experts ? row[e] : -INFINITY;
    // A NaN logit (an upstream bug) becomes -inf so that the order stays total and ids in range.
    logit[s] = isnan(v) ? -INFINITY : v;
    if (e >= num_experts) taken |= 1u << s;
    mx = fmaxf(mx, logit[s]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
#pragma unroll
  for (int s = 0; s < kExpertsPerLane; ++s) {
    ex[s] = lane + 32 * s < num_experts ? expf(logit[s] - mx) : 0.0f;
    sum += ex[s];
  }
  sum = warp_sum(sum);

  int32_t my_id = 0;
  float my_prob = 0.0f, picked_sum = 0.0f;
  for (int j = 0; j < top_k; ++j) {
    // (-inf, INT32_MAX) loses to every real expert, even one at -inf.
    float best = -INFINITY, best_ex = 0.0f;
    int32_t best_id = INT32_MAX;
    int best_slot = 0;
#pragma unroll
    for (int s = 0; s < kExpertsPerLane; ++s) {
      if (!(taken >> s & 1u) && ranks_before(logit[s], lane + 32 * s, best, best_id)) {
        best = logit[s];
        best_id = lane + 32 * s;
        best_ex = ex[s];
        best_slot = s;
      }
    }
    const int32_t winner = warp_argmax(best, best_id);
    // The winner's lane had it as its own best, so best_slot and best_ex there are the winner's.
    const int owner = winner % 32;
    if (lane == owner) taken |= 1u << best_slot;
    const float p = __shfl_sync(kFullMask, best_ex, owner) / sum;
    picked_sum += p;  // in choice order on every lane, as the CPU twin sums
    if (lane == j) {
      my_id = winner;
      my_prob = p;
    }
  }
  if (lane < top_k) {
    ids[lane] = my_id;
    weights[lane] = renormalize ? my_prob / picked_sum : my_prob;
    atomicAdd(&hist[my_id], 1);  // a count: the same whatever order the adds land in
  }
}

__global__ void __launch_bounds__(kRouteThreads)
    route_kernel(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k, bool renormalize,
                 int32_t* topk_ids, float* topk_weights, int32_t* tile_counts) {
  __shared__ int32_t hist[kMoeMaxExperts];
  for (int e = threadIdx.x; e < num_experts; e += kRouteThreads) hist[e] = 0;
  __syncthreads();
  const int64_t tile_begin = int64_t(blockIdx.x) * kTileTokens;
  for (int i = threadIdx.x / 32; i < kTileTokens; i += kRouteWarps) {
    const int64_t t = tile_begin + i;
    if (t >= num_tokens) break;  // warp-uniform, so the warp's shuffles stay converged
    route_token(logits + t * num_experts, num_experts, top_k, renormalize, topk_ids + t * top_k,
                topk_weights + t * top_k, hist);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < num_experts; e += kRouteThreads)
    tile_counts[int64_t(blockIdx.x) * num_experts + e] = hist[e];
}

// Exclusive prefix sum over the block (v in thread order).
__device__ int32_t block_exclusive_scan(int32_t v) {
  __shared__ int32_t warp_totals[kScanThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int32_t inclusive = v;
  for (int offset = 1; offset < 32; offset *= 2) {
    const int32_t up = __shfl_up_sync(kFullMask, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  int32_t base = 0;
  for (int w = 0; w < warp; ++w) base += warp_totals[w];
  return base + inclusive - v;
}

// Thread e turns column e of tile_counts into the count of e in all earlier tiles, then the experts'
// totals are scanned into expert_offsets. With no tiles every offset is 0.
__global__ void __launch_bounds__(kScanThreads)
    scan_kernel(int32_t* tile_counts, int64_t tiles, int32_t num_experts, int32_t* expert_offsets) {
  const int e = threadIdx.x;
  int32_t running = 0;
  if (e < num_experts) {
    for (int64_t t0 = 0; t0 < tiles; t0 += kScanBatch) {
      int32_t c[kScanBatch];
#pragma unroll
      for (int j = 0; j < kScanBatch; ++j) c[j] = t0 + j < tiles ? tile_counts[(t0 + j) * num_experts + e] : 0;
#pragma unroll
      for (int j = 0; j < kScanBatch; ++j) {
        if (t0 + j < tiles) tile_counts[(t0 + j) * num_experts + e] = running;
        running += c[j];
      }
    }
  }
  const int32_t offset = block_exclusive_scan(running);
  if (e < num_experts) expert_offsets[e] = offset;
  if (e == num_experts - 1) expert_offsets[num_experts] = offset + running;
}

// One block per tile, walking its assignments in chunks of kScatterThreads. Within a chunk an
// assignment's slot is: where its expert stands after the tile's earlier chunks, plus its expert's
// count in earlier warps of the chunk, plus its rank among equal experts in earlier lanes.
__global__ void __launch_bounds__(kScatterThreads)
    scatter_kernel(const int32_t* topk_ids, int64_t num_assignments, int32_t top_k, int32_t num_experts,
                   const int32_t* earlier_tiles, const int32_t* expert_offsets, int32_t* sorted) {
  __shared__ int32_t next[kMoeMaxExperts];                       // next free slot per expert
  __shared__ int32_t warp_base[kScatterWarps * kMoeMaxExperts];  // [warp][expert]: count, then slot
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int e = threadIdx.x; e < num_experts; e += kScatterThreads)
    next[e] = expert_offsets[e] + earlier_tiles[int64_t(blockIdx.x) * num_experts + e];
  const int64_t begin = int64_t(blockIdx.x) * kTileTokens * top_k;
  const int64_t end = min(begin + int64_t(kTileTokens) * top_k, num_assignments);
  for (int64_t chunk = begin; chunk < end; chunk += kScatterThreads) {
    for (int i = threadIdx.x; i < kScatterWarps * num_experts; i += kScatterThreads) warp_base[i] = 0;
    __syncthreads();
    const int64_t a = chunk + threadIdx.x;
    const bool valid = a < end;
    const int32_t e = valid ? topk_ids[a] : -1;  // lanes past the end match only each other
    const uint32_t peers = __match_any_sync(kFullMask, e);
    const int rank = __popc(peers & ((1u << lane) - 1));
    if (valid && rank == 0) warp_base[warp * num_experts + e] = __popc(peers);
    __syncthreads();
    for (int x = threadIdx.x; x < num_experts; x += kScatterThreads) {
      int32_t slot = next[x];
      for (int w = 0; w < kScatterWarps; ++w) {
        const int32_t count = warp_base[w * num_experts + x];
        warp_base[w * num_experts + x] = slot;
        slot += count;
      }
      next[x] = slot;
    }
    __syncthreads();
    if (valid) sorted[warp_base[warp * num_experts + e] + rank] = int32_t(a);
    __syncthreads();  // the next chunk rewrites warp_base
  }
}

void check_args(int64_t num_tokens, int32_t num_experts, int32_t top_k) {
  if (num_tokens < 0) throw std::invalid_argument("cuda::moe_route: negative token count");
  if (num_experts < 1 || num_experts > kMoeMaxExperts)
    throw std::invalid_argument("cuda::moe_route: num_experts must be in [1, kMoeMaxExperts]");
  if (top_k < 1 || top_k > std::min(num_experts, kMoeMaxTopK))
    throw std::invalid_argument("cuda::moe_route: top_k must be in [1, min(num_experts, kMoeMaxTopK)]");
  if (num_tokens * top_k > INT32_MAX) throw std::invalid_argument("cuda::moe_route: assignments overflow int32");
}

}  // namespace

size_t moe_route_workspace_bytes(int64_t num_tokens, int32_t num_experts, int32_t top_k) {
  check_args(num_tokens, num_experts, top_k);
  return size_t(num_tiles(num_tokens)) * size_t(num_experts) * sizeof(int32_t);
}

void moe_route(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k, bool renormalize,
               const MoeRouting& out, void* workspace, CUstream_st* stream) {
  check_args(num_tokens, num_experts, top_k);
  if (num_tokens > 0 && workspace == nullptr) throw std::invalid_argument("cuda::moe_route: no workspace");
  const int64_t tiles = num_tiles(num_tokens);
  auto* tile_counts = static_cast<int32_t*>(workspace);
  if (tiles > 0) {
    FLASHSERVE_LAUNCH(unsigned(tiles), kRouteThreads, 0, stream, route_kernel)(
        logits, num_tokens, num_experts, top_k, renormalize, out.topk_ids, out.topk_weights, tile_counts);
    FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  }
  FLASHSERVE_LAUNCH(1, kScanThreads, 0, stream, scan_kernel)(tile_counts, tiles, num_experts, out.expert_offsets);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  if (tiles > 0) {
    FLASHSERVE_LAUNCH(unsigned(tiles), kScatterThreads, 0, stream, scatter_kernel)(
        out.topk_ids, num_tokens * top_k, top_k, num_experts, tile_counts, out.expert_offsets, out.sorted_assignments);
    FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace flashserve::kernels::cuda
