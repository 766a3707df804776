// Each CUDA op against its CPU twin and the f64 reference, on fresh random inputs. Without a CUDA
// device (CI, laptops) every test skips, saying so.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <random>

#include "kernels/cuda/cuda_check.h"
#include "kernels/device.h"
#include "kernels/rmsnorm.h"
#include "tests/kernels/reference.h"

namespace flashserve {
namespace {

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// Device copy of a host vector, freed with the object.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<float>& host) : n_(host.size()) {
    FLASHSERVE_CUDA_CHECK(cudaMalloc(&ptr_, n_ * sizeof(float)));
    FLASHSERVE_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(float), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  float* get() { return ptr_; }
  std::vector<float> to_host() const {
    std::vector<float> out(n_);
    FLASHSERVE_CUDA_CHECK(cudaMemcpy(out.data(), ptr_, n_ * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  size_t n_;
  float* ptr_ = nullptr;
};

TEST_F(CudaOps, RmsNormMatchesCpuAndReference) {
  std::mt19937 rng(17);
  for (auto [rows, dim] : {std::pair<int64_t, int64_t>{1, 64}, {3, 576}, {17, 1000}, {64, 4096}}) {
    const auto x = test::random_floats(rng, rows * dim, -3.0f, 3.0f);
    const auto w = test::random_floats(rng, dim, 0.5f, 1.5f);
    std::vector<float> cpu(x.size());
    kernels::rmsnorm(x.data(), w.data(), cpu.data(), rows, dim, 1e-5f);
    DeviceBuffer dx(x), dw(w), dy(std::vector<float>(x.size()));
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
