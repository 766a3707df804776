#include "kernels/device.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace flashserve::kernels::cuda {

int device_count() {
  int n = 0;
  // No driver or no GPU is an answer here (0), not an error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string device_name() {
  cudaDeviceProp prop{};
  FLASHSERVE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return prop.name;
}

}  // namespace flashserve::kernels::cuda
