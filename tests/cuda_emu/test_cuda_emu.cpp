// The host emulator itself: warp collectives return what the CUDA programming guide says, and code
// that real hardware would leave undefined (a collective waiting on an exited lane, a barrier and a
// shuffle waiting on each other, a missing barrier, a read past an allocation or of memory nothing
// wrote) is reported, not silently run.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/launch.h"
#include "kernels/cuda/mma.cuh"

namespace flashserve {
namespace {

__global__ void shuffles(int* out) {
  const int lane = threadIdx.x % 32, base = 4 * int(threadIdx.x);
  out[base + 0] = __shfl_xor_sync(0xffffffffu, lane * 10, 5);
  out[base + 1] = __shfl_up_sync(0xffffffffu, lane * 10, 3);
  out[base + 2] = __shfl_down_sync(0xffffffffu, lane * 10, 3, 16);
  out[base + 3] = __shfl_sync(0xffffffffu, lane * 10, 7);
}

TEST(CudaEmu, ShufflesReadTheLanesTheGuideNames) {
  std::vector<int> out(4 * 64);
  FLASHSERVE_LAUNCH(1, 64, 0, nullptr, shuffles)(out.data());
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    EXPECT_EQ(out[4 * t + 0], (lane ^ 5) * 10);
    EXPECT_EQ(out[4 * t + 1], (lane >= 3 ? lane - 3 : lane) * 10);            // below the warp: own value
    EXPECT_EQ(out[4 * t + 2], (lane % 16 < 13 ? lane + 3 : lane) * 10);       // past its 16-lane segment: own
    EXPECT_EQ(out[4 * t + 3], 70);
  }
}

__global__ void early_exit_then_shuffle(int* out) {
  if (threadIdx.x == 3) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

__global__ void barrier_against_shuffle(int* out) {
  if (threadIdx.x == 0) __syncthreads();
  else out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);
}

__global__ void throws_on_bad_width(int* out) { out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0, 3); }

TEST(CudaEmu, UndefinedCollectivesAreReported) {
  std::vector<int> out(32);
  EXPECT_THROW(FLASHSERVE_LAUNCH(1, 32, 0, nullptr, early_exit_then_shuffle)(out.data()), std::runtime_error);
  EXPECT_THROW(FLASHSERVE_LAUNCH(1, 32, 0, nullptr, barrier_against_shuffle)(out.data()), std::runtime_error);
  EXPECT_THROW(FLASHSERVE_LAUNCH(1, 32, 0, nullptr, throws_on_bad_width)(out.data()), std::logic_error);
  EXPECT_THROW(FLASHSERVE_LAUNCH(1, 2048, 0, nullptr, shuffles)(out.data()), std::runtime_error);
}

// Thread t publishes t, then (without the barrier the code needs) reads thread t + 1's slot.
__global__ void missing_barrier(int* out) {
  __shared__ int slots[64];
  slots[threadIdx.x] = -1;
  __syncthreads();
  slots[threadIdx.x] = int(threadIdx.x);
  out[blockIdx.x * 64 + threadIdx.x] = threadIdx.x < 63 ? slots[threadIdx.x + 1] : 0;
}

// Identical blocks must give identical results; here the one running threads in order reads slots
// not yet written and the one running them in reverse reads fresh ones, so the race shows.
TEST(CudaEmu, AlternatingThreadOrderExposesAMissingBarrier) {
  std::vector<int> out(2 * 64);
  FLASHSERVE_LAUNCH(2, 64, 0, nullptr, missing_barrier)(out.data());
  EXPECT_NE(std::vector<int>(out.begin(), out.begin() + 64), std::vector<int>(out.begin() + 64, out.end()));
}

// mma.sync against a plain product, with A, B and C placed in the fragments as mma.cuh documents.
__global__ void one_mma(const float* a, const float* b, float* c) {
  using kernels::cuda::pack2;
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  const auto A = [&](int r, int k) { return a[r * 16 + k]; };
  const auto B = [&](int k, int n) { return b[k * 8 + n]; };
  const uint32_t af[4] = {pack2<__half>(A(g, 2 * t), A(g, 2 * t + 1)),
                          pack2<__half>(A(g + 8, 2 * t), A(g + 8, 2 * t + 1)),
                          pack2<__half>(A(g, 2 * t + 8), A(g, 2 * t + 9)),
                          pack2<__half>(A(g + 8, 2 * t + 8), A(g + 8, 2 * t + 9))};
  const uint32_t bf[2] = {pack2<__half>(B(2 * t, g), B(2 * t + 1, g)), pack2<__half>(B(2 * t + 8, g), B(2 * t + 9, g))};
  float acc[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  kernels::cuda::mma_16x8x16<__half>(acc, af, bf);
  for (int i = 0; i < 4; ++i) c[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[i];
}

TEST(CudaEmu, MmaComputesTheDocumentedProduct) {
  std::vector<float> a(16 * 16), b(16 * 8), c(16 * 8);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 7) - 3) * 0.5f;  // exact in f16
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 5) - 2) * 0.25f;
  FLASHSERVE_LAUNCH(1, 32, 0, nullptr, one_mma)(a.data(), b.data(), c.data());
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      float want = 1.0f;
      for (int k = 0; k < 16; ++k) want += a[r * 16 + k] * b[k * 8 + n];
      EXPECT_EQ(c[r * 8 + n], want) << "row " << r << " col " << n;
    }
}

__global__ void read_at(const float* in, int64_t index, float* out) { *out = in[index]; }

// Device allocations end against a guard page: the last element reads fine, the one after it kills
// the process with a message, as compute-sanitizer's memcheck would flag it.
TEST(CudaEmu, ReadingPastADeviceAllocationIsCaught) {
  float* in = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&in), 64 * sizeof(float)), cudaSuccess);
  for (int i = 0; i < 64; ++i) in[i] = float(i);
  float out = 0.0f;
  FLASHSERVE_LAUNCH(1, 1, 0, nullptr, read_at)(in, 63, &out);
  EXPECT_EQ(out, 63.0f);
  EXPECT_DEATH(FLASHSERVE_LAUNCH(1, 1, 0, nullptr, read_at)(in, 64, &out), "past its end");
  EXPECT_EQ(cudaFree(in), cudaSuccess);
  EXPECT_EQ(cudaFree(in), cudaErrorInvalidValue);  // freed twice
}

// Fresh device memory holds garbage on a GPU; here it is all ones bytes (NaN as a float), so a
// kernel that reads before anything wrote shows NaN instead of a lucky zero.
TEST(CudaEmu, FreshDeviceMemoryReadsAsNaN) {
  float* in = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&in), 16 * sizeof(float)), cudaSuccess);
  float out = 0.0f;
  FLASHSERVE_LAUNCH(1, 1, 0, nullptr, read_at)(in, 5, &out);
  EXPECT_TRUE(std::isnan(out)) << out;
  EXPECT_EQ(cudaFree(in), cudaSuccess);
}

}  // namespace
}  // namespace flashserve
