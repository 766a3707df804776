// Every CUDA runtime call goes through FLASHSERVE_CUDA_CHECK: a failure throws with the statement,
// file and line, so an error surfaces where it happened rather than at a later sync.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#define FLASHSERVE_CUDA_CHECK(stmt)                                                                  \
  do {                                                                                               \
    const cudaError_t flashserve_err_ = (stmt);                                                      \
    if (flashserve_err_ != cudaSuccess) {                                                            \
      throw std::runtime_error(std::string(#stmt) + " failed at " + __FILE__ + ":" +                 \
                               std::to_string(__LINE__) + ": " + cudaGetErrorString(flashserve_err_)); \
    }                                                                                                \
  } while (0)
