// What every CUDA test needs: a fixture that skips without a device, and device buffers.
#pragma once
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/backend.h"

namespace flashserve::test {

// Without a CUDA device (CI, laptops) every test of this fixture reports itself skipped.
class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kernels::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// A device copy of a host vector (or n uninitialised elements), freed with the object.

template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<T>& host) : n_(host.size()) {
    FLASHSERVE_CUDA_CHECK(cudaMalloc(&ptr_, bytes()));
    FLASHSERVE_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  // n elements of uninitialised device memory.
  explicit DeviceBuffer(size_t n) : n_(n) { FLASHSERVE_CUDA_CHECK(cudaMalloc(&ptr_, bytes())); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr_); }

  T* get() { return ptr_; }
  size_t size() const { return n_; }
  std::vector<T> to_host() const {
    std::vector<T> out(n_);
    FLASHSERVE_CUDA_CHECK(cudaDeviceSynchronize());
    FLASHSERVE_CUDA_CHECK(cudaMemcpy(out.data(), ptr_, bytes(), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  size_t bytes() const { return (n_ ? n_ : 1) * sizeof(T); }
  size_t n_;
  T* ptr_ = nullptr;
};

}  // namespace flashserve::test
