// The table of CPU ops one compiled copy provides (kernels/cpu/isa_namespace.h says why there are
// several). Each op file includes this header, so a call from one op to another stays in its copy.
#pragma once
#include "kernels/cpu/isa_namespace.h"
#include "kernels/cpu_isa.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/moe_routing.h"
#include "kernels/paged_attention.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"
#include "kernels/swiglu.h"

// Every op the public headers declare whose code depends on the instruction set.
#define FLASHSERVE_CPU_OPS(X) \
  X(matmul) X(matmul_q8) X(matmul_q8_packed) X(get_row) X(get_rows) X(rmsnorm) X(add_rmsnorm) X(rope) X(swiglu) X(geglu) \
  X(add_bias) X(scale) X(kv_write) X(paged_attention) X(moe_route) X(scatter_rows) X(weighted_sum_rows) \
  X(softmax)

namespace flashserve::kernels {

// Throws std::invalid_argument with a printf-formatted message. Op files build error messages
// through this (compiled once, for plain x86-64) rather than with std::string: the string code they
// would inline is shared across copies, so the linker could keep an AVX-512 build of it for the
// whole program (tests/kernels/check_isa_isolation.sh fails on any such symbol).
[[noreturn]] void throw_invalid_argument(const char* format, ...) __attribute__((format(printf, 1, 2)));

struct CpuOps {
#define FLASHSERVE_OP_FIELD(name) decltype(&::flashserve::kernels::name) name;
  FLASHSERVE_CPU_OPS(FLASHSERVE_OP_FIELD)
#undef FLASHSERVE_OP_FIELD
};

// The table of one compiled copy (any level, supported here or not: the caller checks).
const CpuOps& cpu_ops(CpuIsa isa);

namespace FLASHSERVE_ISA {
// The same signatures as the public declarations, in this copy's namespace.
#define FLASHSERVE_OP_DECLARE(name) decltype(::flashserve::kernels::name) name;
FLASHSERVE_CPU_OPS(FLASHSERVE_OP_DECLARE)
#undef FLASHSERVE_OP_DECLARE
extern const CpuOps ops;
}  // namespace FLASHSERVE_ISA

}  // namespace flashserve::kernels
