// This copy's table (compiled once per instruction set, like the op files).
#include "kernels/cpu/cpu_ops.h"

namespace flashserve::kernels::FLASHSERVE_ISA {

#define FLASHSERVE_OP_ADDRESS(name, params, args) &name,
const CpuOps ops = {FLASHSERVE_CPU_OPS(FLASHSERVE_OP_ADDRESS)};
#undef FLASHSERVE_OP_ADDRESS

}  // namespace flashserve::kernels::FLASHSERVE_ISA
