#include "kernels/device.h"

#include <cuda_runtime.h>

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

}  // namespace flashserve::kernels::cuda
