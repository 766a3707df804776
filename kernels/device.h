// Which backends this build and this machine offer.
#pragma once

namespace flashserve::kernels::cuda {

// CUDA devices usable by this process; 0 without a driver or GPU. Defined only in CUDA builds
// (FLASHSERVE_HAVE_CUDA).
int device_count();

}  // namespace flashserve::kernels::cuda
