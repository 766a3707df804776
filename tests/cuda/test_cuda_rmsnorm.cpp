// CUDA RMSNorm against its CPU twin and the f64 reference, on fresh random inputs.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <random>

#include "kernels/cuda/cuda_check.h"
#include "kernels/rmsnorm.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/reference.h"

namespace flashserve {
namespace {

using test::DeviceBuffer;
using CudaOps = test::CudaTest;

TEST_F(CudaOps, RmsNormMatchesCpuAndReference) {
  std::mt19937 rng(17);
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{1, 64}, {3, 576}, {17, 1000}, {64, 4096}}) {
    const auto x = test::random_floats(rng, rows * dim, -3.0f, 3.0f);
    const auto w = test::random_floats(rng, dim, 0.5f, 1.5f);
    std::vector<float> cpu(x.size());
    kernels::rmsnorm(x.data(), w.data(), cpu.data(), rows, dim, 1e-5f);
    DeviceBuffer<float> dx(x), dw(w), dy(x.size());
    kernels::cuda::rmsnorm(dx.get(), dw.get(), dy.get(), rows, dim, 1e-5f, nullptr);
    FLASHSERVE_CUDA_CHECK(cudaDeviceSynchronize());
    const auto gpu = dy.to_host();
    const auto ref = test::ref_rmsnorm(x.data(), w.data(), rows, dim, 1e-5f);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_NEAR(gpu[i], cpu[i], 1e-5 * (1 + std::abs(cpu[i]))) << "rows " << rows << " dim " << dim << " at " << i;
      ASSERT_NEAR(gpu[i], ref[i], 1e-5 * (1 + std::abs(ref[i])));
    }
  }
}

TEST(CudaOpsWithoutDevice, RmsNormRejectsEmptyInput) {
  EXPECT_THROW(kernels::cuda::rmsnorm(nullptr, nullptr, nullptr, 0, 64, 1e-5f, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace flashserve
