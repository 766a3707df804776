// A build without nvcc: the CUDA backend is absent, and asking for it says so.
#include <stdexcept>

#include "kernels/backend.h"

namespace flashserve::kernels {

int cuda_device_count() { return 0; }

std::unique_ptr<Backend> make_cuda_backend(bool) {
  throw std::runtime_error("--device cuda: this build has no CUDA backend (nvcc was not found at build time)");
}

}  // namespace flashserve::kernels
