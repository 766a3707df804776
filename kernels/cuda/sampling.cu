// One thread block per row, no sort of the vocabulary. Tokens are ranked by one 64-bit key (logit,
// then lower id first), so every truncation is "the keys at or above a cutoff": top-k and top-p
// cutoffs are found bit by bit, each bit one block-wide count or mass over the row. The draw then
// walks the kept ids in ascending order across the threads of the block.
//
// Rounding: every sum is taken in a fixed order (deterministic run to run), and products are
// written with explicit round-to-nearest intrinsics so nvcc cannot fuse them into FMAs that the CPU
// rules do not use. The probabilities come from the device's expf rather than the CPU's vectorised
// exp, so a GPU draw can differ from the CPU twin's only when the uniform lands within a few ulps
// of a boundary between two tokens' cumulative masses.
#include <cstdint>
#include <stdexcept>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/sampling.h"

namespace flashserve::kernels::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarp = 32;
constexpr int kWarps = kThreads / kWarp;
static_assert(kWarps == kWarp, "block_reduce has one lane per warp in its second stage");

// Unsigned order equal to float order: negatives flipped, positives above them; -0 ranks as +0 (they
// compare equal, so ids break the tie) and NaN below everything.
__device__ uint32_t ordered_bits(float l) {
  if (isnan(l)) return 0;
  if (l == 0.0f) l = 0.0f;
  const uint32_t b = __float_as_uint(l);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

struct Shared {
  unsigned long long u64[kWarps];
  double f64[kWarps];
  int i32[kWarps];
  double scan[kThreads];
  double warp_base[kWarps];
  double total;
};

// The same tree on every call and every thread, so every thread gets the same bits; with
// non-negative terms, dropping some (zeroing them) can only lower the result.
template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T* warp_values) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  if (lane == 0) warp_values[warp] = v;
  __syncthreads();
  v = warp_values[lane];
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();  // warp_values is free for the next reduction
  return v;
}

__device__ double block_sum(double v, Shared& s) {
  return block_reduce(v, [](double a, double b) { return a + b; }, s.f64);
}
__device__ int block_count(int v, Shared& s) {
  return block_reduce(v, [](int a, int b) { return a + b; }, s.i32);
}
__device__ unsigned long long block_max(unsigned long long v, Shared& s) {
  return block_reduce(v, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; }, s.u64);
}

// A row after its adjusts. key: logit bits above (vocab - 1 - id), so higher is better and equal
// logits rank the lower id first -- RequestSampler's total order as one integer.
struct Row {
  const float* logits;  // the adjusted row, in shared memory when it fits
  int vocab;
  float max;
  float temperature;
  float inv_sum;  // 1 / sum of exp((logit - max) / T)

  __device__ unsigned long long key(int i) const {
    return (static_cast<unsigned long long>(ordered_bits(logits[i])) << 32) | static_cast<uint32_t>(vocab - 1 - i);
  }
  __device__ float exp_term(int i) const { return expf(__fdiv_rn(__fsub_rn(logits[i], max), temperature)); }
  // As the CPU softmax: exp times the reciprocal of the sum.
  __device__ float prob(int i) const { return __fmul_rn(exp_term(i), inv_sum); }
};

__device__ int id_of(unsigned long long key, int vocab) { return vocab - 1 - static_cast<int>(key & 0xffffffffu); }

// RequestSampler's order per token: bias, repetition penalty (seen tokens), frequency and presence
// (generated tokens). Entries name distinct tokens, so threads never write the same logit.
__device__ void apply_adjusts(float* logits, int vocab, const SamplingRow& row, const TokenAdjust* adjusts) {
  for (int i = row.adjust_begin + threadIdx.x; i < row.adjust_end; i += kThreads) {
    const TokenAdjust a = adjusts[i];
    if (a.token < 0 || a.token >= vocab) continue;  // the CPU twin rejects these; never write outside the row
    float l = __fadd_rn(logits[a.token], a.bias);
    if (row.repetition_penalty != 1.0f && a.seen)
      l = l > 0.0f ? __fdiv_rn(l, row.repetition_penalty) : __fmul_rn(l, row.repetition_penalty);
    if ((row.frequency_penalty != 0.0f || row.presence_penalty != 0.0f) && a.output_count > 0) {
      const float penalty =
          __fadd_rn(__fmul_rn(static_cast<float>(a.output_count), row.frequency_penalty), row.presence_penalty);
      l = __fsub_rn(l, penalty);
    }
    logits[a.token] = l;
  }
}

// Constrained decoding: what the row's mask forbids can never be picked. After the adjusts (and a
// barrier), so a bias on a forbidden token cannot bring it back.
__device__ void apply_mask(float* logits, int vocab, const uint32_t* mask) {
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    if (!((mask[i >> 5] >> (i & 31)) & 1u)) logits[i] = -INFINITY;
  }
}

// The largest key K with weight(K) >= target, where weight(K) is the block-wide weight of the tokens
// whose key is >= K and never grows with K. Built from the top bit down: a bit stays set when the
// weight at (prefix | bit) still reaches the target. The result is a token's key (or 0 when even the
// whole row falls short). Bits 31..id_bits are zero in every key, so they are skipped.
template <typename T, typename Weight>
__device__ unsigned long long largest_key_reaching(T target, int vocab, Weight weight) {
  const int id_bits = 32 - __clz(vocab - 1);
  unsigned long long key = 0;
  for (int bit = 63; bit >= 0; --bit) {
    if (bit < 32 && bit >= id_bits) continue;
    const unsigned long long candidate = key | (1ull << bit);
    if (weight(candidate) >= target) key = candidate;
  }
  return key;
}

__device__ int count_at_least(const Row& r, unsigned long long cutoff, Shared& s) {
  int n = 0;
  for (int i = threadIdx.x; i < r.vocab; i += kThreads) n += r.key(i) >= cutoff;
  return block_count(n, s);
}

__device__ double mass_at_least(const Row& r, unsigned long long cutoff, Shared& s) {
  double m = 0.0;
  for (int i = threadIdx.x; i < r.vocab; i += kThreads) m += r.key(i) >= cutoff ? r.prob(i) : 0.0f;
  return block_sum(m, s);
}

// Top-k, then top-p of the top-k survivors' mass (of everything when top-k is off, whose mass
// RequestSampler takes as 1). The top-p cutoff is the last key of the shortest best-first prefix
// reaching the target, so it never falls below the top-k cutoff: mass_at_least(top-k cutoff) is the
// base itself, which reaches top_p * base.
__device__ unsigned long long truncation_cutoff(const Row& r, const SamplingRow& row, Shared& s) {
  const bool top_k_on = row.top_k > 0 && row.top_k < r.vocab;
  unsigned long long cutoff = 0;
  if (top_k_on) {
    cutoff = largest_key_reaching(row.top_k, r.vocab, [&](unsigned long long k) { return count_at_least(r, k, s); });
  }
  if (row.top_p < 1.0f) {
    const double base = top_k_on ? mass_at_least(r, cutoff, s) : 1.0;
    const unsigned long long nucleus = largest_key_reaching(
        __dmul_rn(row.top_p, base), r.vocab, [&](unsigned long long k) { return mass_at_least(r, k, s); });
    cutoff = nucleus > cutoff ? nucleus : cutoff;
  }
  return cutoff;
}

// Each thread's [before, after) share of the kept mass, thread order being id order. Serial sums
// (within each warp's 32 threads, then across warps) keep the boundaries non-decreasing, and thread
// i's `after` comes from the same operands as thread i + 1's `before`: the shares tile [0, total)
// exactly, so a target below the total lies in exactly one non-empty share.
struct Share {
  double before, after, total;
};

__device__ Share block_shares(double v, Shared& s) {
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  s.scan[threadIdx.x] = v;
  __syncthreads();
  if (lane == 0) {
    double run = 0.0;
    for (int i = 0; i < kWarp; ++i) s.scan[threadIdx.x + i] = run = __dadd_rn(run, s.scan[threadIdx.x + i]);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double run = 0.0;
    for (int w = 0; w < kWarps; ++w) {
      s.warp_base[w] = run;
      run = __dadd_rn(run, s.scan[w * kWarp + kWarp - 1]);
    }
    s.total = run;
  }
  __syncthreads();
  const double base = s.warp_base[warp];
  const double before = lane == 0 ? base : __dadd_rn(base, s.scan[threadIdx.x - 1]);
  return {before, __dadd_rn(base, s.scan[threadIdx.x]), s.total};
}

// Walks the kept ids in ascending order to the first whose cumulative probability passes
// uniform * total, the target kept strictly below the total. Threads own contiguous id ranges; the
// one whose share holds the target walks its range (if its serial sum rounds short of the target,
// its last token with mass is chosen, as on the CPU).
__device__ void draw(const Row& r, unsigned long long cutoff, float min_prob, double uniform, int best, Shared& s,
                     int32_t* token) {
  auto kept_prob = [&](int i) {
    const float p = r.prob(i);
    return r.key(i) >= cutoff && !(p < min_prob) ? p : 0.0f;
  };
  const int chunk = (r.vocab + kThreads - 1) / kThreads;
  const int begin = min(r.vocab, static_cast<int>(threadIdx.x) * chunk), end = min(r.vocab, begin + chunk);
  double local = 0.0;
  for (int i = begin; i < end; ++i) local = __dadd_rn(local, kept_prob(i));
  const Share share = block_shares(local, s);
  if (!(share.total > 0.0)) {  // only a row of NaNs or -infs: nothing has mass
    if (threadIdx.x == 0) *token = best;
    return;
  }
  const double target = fmin(__dmul_rn(uniform, share.total), nextafter(share.total, 0.0));
  if (!(share.before <= target && target < share.after)) return;
  double cumulative = share.before;
  int chosen = begin;
  for (int i = begin; i < end; ++i) {
    const float p = kept_prob(i);
    if (p <= 0.0f) continue;
    chosen = i;
    cumulative = __dadd_rn(cumulative, p);
    if (cumulative > target) break;
  }
  *token = chosen;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(float* logits, int vocab, bool cache_row, const SamplingRow* rows, const TokenAdjust* adjusts,
                  const uint32_t* masks, int32_t* tokens) {
  FLASHSERVE_DYNAMIC_SHARED(float, row_cache);
  __shared__ Shared s;
  const SamplingRow row = rows[blockIdx.x];
  float* l = logits + static_cast<size_t>(blockIdx.x) * vocab;
  apply_adjusts(l, vocab, row, adjusts);
  __syncthreads();
  if (row.mask_row >= 0) {
    apply_mask(l, vocab, masks + static_cast<size_t>(row.mask_row) * static_cast<size_t>((vocab + 31) / 32));
    __syncthreads();
  }
  // The cutoff searches read the row dozens of times: from shared memory when it fits.
  if (cache_row) {
    for (int i = threadIdx.x; i < vocab; i += kThreads) row_cache[i] = l[i];
    __syncthreads();
  }
  Row r{cache_row ? row_cache : l, vocab, 0.0f, row.temperature, 0.0f};

  unsigned long long best_key = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) best_key = max(best_key, r.key(i));
  const int best = id_of(block_max(best_key, s), vocab);
  if (row.temperature == 0.0f) {
    if (threadIdx.x == 0) tokens[blockIdx.x] = best;
    return;
  }
  r.max = r.logits[best];
  double sum = 0.0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) sum += r.exp_term(i);
  r.inv_sum = __fdiv_rn(1.0f, static_cast<float>(block_sum(sum, s)));

  const unsigned long long cutoff = truncation_cutoff(r, row, s);
  const float min_prob = __fmul_rn(row.min_p, r.prob(best));
  draw(r, cutoff, min_prob, row.uniform, best, s, tokens + blockIdx.x);
}

// Dynamic shared memory for the row, or 0 when it does not fit next to the kernel's own.
size_t row_cache_bytes(int32_t vocab) {
  int device = 0, optin = 0;
  FLASHSERVE_CUDA_CHECK(cudaGetDevice(&device));
  FLASHSERVE_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const size_t bytes = static_cast<size_t>(vocab) * sizeof(float);
  return bytes + sizeof(Shared) <= static_cast<size_t>(optin) ? bytes : 0;
}

}  // namespace

void sample_rows(float* logits, int32_t num_rows, int32_t vocab, const SamplingRow* rows,
                 const TokenAdjust* adjusts, const uint32_t* masks, int32_t* tokens, CUstream_st* stream) {
  if (num_rows < 0 || vocab <= 0) throw std::invalid_argument("cuda::sample_rows: need num_rows >= 0 and vocab > 0");
  if (num_rows == 0) return;
  if (logits == nullptr || rows == nullptr || tokens == nullptr)
    throw std::invalid_argument("cuda::sample_rows: null logits, rows or tokens");
  const size_t cache = row_cache_bytes(vocab);
  // Above 48 KiB a kernel must opt in; not a stream operation, so it is allowed during graph capture.
  FLASHSERVE_CUDA_CHECK(
      cudaFuncSetAttribute(sample_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(cache)));
  FLASHSERVE_LAUNCH(static_cast<unsigned>(num_rows), kThreads, cache, stream, sample_kernel)(
      logits, vocab, cache > 0, rows, adjusts, masks, tokens);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace flashserve::kernels::cuda
