// Kernel launches and dynamic shared memory spelled so that the same sources also build as plain
// C++ under the host emulator (tests/cuda_emu), which runs the kernels in CI where no GPU exists.
#pragma once

#ifdef FLASHSERVE_CUDA_EMULATION
#define FLASHSERVE_LAUNCH(grid, block, smem, stream, ...) \
  ::flashserve::cuda_emu::launch(grid, block, smem, stream, __VA_ARGS__)
#define FLASHSERVE_DYNAMIC_SHARED(type, name) \
  type* const name = static_cast<type*>(::flashserve::cuda_emu::dynamic_shared())
#else
// FLASHSERVE_LAUNCH(grid, block, smem, stream, kernel)(args...) is kernel<<<grid, block, smem, stream>>>(args...).
#define FLASHSERVE_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
// extern __shared__ type name[];
#define FLASHSERVE_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif
