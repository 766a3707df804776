// Runs our CUDA kernels on the CPU, so their logic is tested in CI where no GPU exists. The kernel
// sources in kernels/cuda/ are compiled as plain C++ with this header force-included (-include):
// the toolkit's own headers give the host types (dim3, uint4, __half, ...), this one gives what only
// nvcc knows: thread and block indices, shared memory, barriers, warp collectives and device
// intrinsics. cuda_emu.cpp executes a launch one block at a time, each CUDA thread a fiber, and stops
// with a message on what real hardware would leave undefined (a barrier not every thread reaches, a
// warp collective naming a lane that has exited or waits elsewhere).
//
// What it cannot tell: timing, memory-model races between blocks, and device-only rounding (expf,
// exp2f and friends come from the host's libm); tests that compare against CPU twins allow for that.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

// nvcc's storage and launch annotations. Shared memory is one object per kernel instantiation,
// which is right because the blocks of a launch run one after another.
#undef __shared__
#define __shared__ static
#define __launch_bounds__(...)

namespace flashserve::cuda_emu {

// What the running fiber sees as its built-in variables.
struct ThreadContext {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
};
const ThreadContext& this_thread();

enum class WarpOp { Sync, Shfl, ShflXor, ShflUp, ShflDown, MatchAny, Ballot, Mma };

// Blocks the calling fiber until every lane named in mask has reached the same collective; returns
// this lane's result. arg is the source lane, lane mask or delta; width the shuffle's segment.
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width);
void sync_threads();
// mma.sync.aligned.m16n8k16.row.col with f32 accumulators, on every lane's fragments at once
// (kernels/cuda/mma.cuh spells out the layout): products exact, sums in double, rounded once.
void mma_16x8x16(bool bf16, float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]);
void* dynamic_shared();

// Runs op now, or records it when its stream is being captured.
void enqueue(cudaStream_t stream, std::function<void()> op);
// Runs (or records) one launch.
void submit(dim3 grid, dim3 block, size_t dynamic_shared_bytes, cudaStream_t stream, std::function<void()> body);

// kernel<<<grid, block, smem, stream>>>(args...) spelled launch(grid, block, smem, stream, kernel)(args...).
template <class Kernel>
auto launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Kernel* kernel) {
  return [=](auto... args) { submit(grid, block, smem, stream, [=] { kernel(args...); }); };
}

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>);
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

template <class T>
T from_bits(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

}  // namespace flashserve::cuda_emu

#define threadIdx (::flashserve::cuda_emu::this_thread().thread_idx)
#define blockIdx (::flashserve::cuda_emu::this_thread().block_idx)
#define blockDim (::flashserve::cuda_emu::this_thread().block_dim)
#define gridDim (::flashserve::cuda_emu::this_thread().grid_dim)

inline void __syncthreads() { ::flashserve::cuda_emu::sync_threads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::flashserve::cuda_emu::warp_collective(::flashserve::cuda_emu::WarpOp::Sync, mask, 0, 0, 32);
}

template <class T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  using namespace ::flashserve::cuda_emu;
  return from_bits<T>(warp_collective(WarpOp::Shfl, mask, to_bits(v), src_lane, width));
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  using namespace ::flashserve::cuda_emu;
  return from_bits<T>(warp_collective(WarpOp::ShflXor, mask, to_bits(v), lane_mask, width));
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  using namespace ::flashserve::cuda_emu;
  return from_bits<T>(warp_collective(WarpOp::ShflUp, mask, to_bits(v), int(delta), width));
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  using namespace ::flashserve::cuda_emu;
  return from_bits<T>(warp_collective(WarpOp::ShflDown, mask, to_bits(v), int(delta), width));
}
template <class T>
unsigned __match_any_sync(unsigned mask, T v) {
  using namespace ::flashserve::cuda_emu;
  return unsigned(warp_collective(WarpOp::MatchAny, mask, to_bits(v), 0, 32));
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  using namespace ::flashserve::cuda_emu;
  return unsigned(warp_collective(WarpOp::Ballot, mask, predicate != 0, 0, 32));
}

template <class T>
T __ldg(const T* p) {
  return *p;
}

// Built with -ffp-contract=off, so these round exactly as their names say.
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __expf(float x) { return std::exp(x); }

inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __clz(int x) { return std::countl_zero(unsigned(x)); }
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t bytes = (uint64_t(y) << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= unsigned((bytes >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}

// Fibers switch only at barriers and collectives, so a read-modify-write cannot be interleaved.
template <class T>
T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}

// Device code calls min and max unqualified on mixed integer types, as CUDA's overloads allow.
template <class A, class B>
  requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(b) < C(a) ? C(b) : C(a);
}
template <class A, class B>
  requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(a) < C(b) ? C(b) : C(a);
}

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
using std::isfinite;
using std::isinf;
using std::isnan;

// cuda_runtime.h declares this overload for nvcc only.
template <class T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
