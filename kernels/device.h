// Which backends this build and this machine offer.
#pragma once
#include <string>

namespace flashserve::kernels::cuda {

// CUDA devices usable by this process; 0 without a driver or GPU. Defined only in CUDA builds
// (FLASHSERVE_HAVE_CUDA).
int device_count();
// Device 0's name, e.g. "NVIDIA H100 80GB HBM3" (for logs and benchmark headers).
std::string device_name();

}  // namespace flashserve::kernels::cuda
