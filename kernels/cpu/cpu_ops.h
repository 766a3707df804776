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

// Every op the public headers declare whose code depends on the instruction set: its name, its
// parameters (as the header declares them; cpu_dispatch.cpp checks) and the same names as arguments, from which cpu_dispatch.cpp makes the public function
// that runs this CPU's copy.
#define FLASHSERVE_CPU_OPS(X)                                                                                      \
  X(matmul, (const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype, int64_t n_out, float* y),  \
    (x, num_tokens, k, w, wtype, n_out, y))                                                                        \
  X(matmul_q8, (const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype, int64_t n_out, float* y), \
    (x, num_tokens, k, w, wtype, n_out, y))                                                                        \
  X(matmul_q8_packed,                                                                                              \
    (const float* x, int64_t num_tokens, int64_t k, const void* packed, DType wtype, int64_t n_out, float* y),     \
    (x, num_tokens, k, packed, wtype, n_out, y))                                                                   \
  X(get_row, (const void* w, DType wtype, int64_t k, int64_t row, float* out), (w, wtype, k, row, out))            \
  X(get_rows, (const void* w, DType wtype, int64_t k, const int32_t* ids, int64_t n, float* out),                  \
    (w, wtype, k, ids, n, out))                                                                                    \
  X(rmsnorm, (const float* x, const float* weight, float* y, int64_t num_rows, int64_t dim, float eps),            \
    (x, weight, y, num_rows, dim, eps))                                                                            \
  X(add_rmsnorm,                                                                                                   \
    (float* x, const float* residual, const float* weight, float* y, int64_t num_rows, int64_t dim, float eps),    \
    (x, residual, weight, y, num_rows, dim, eps))                                                                  \
  X(rope, (float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,            \
           const RopeParams& p),                                                                                   \
    (x, positions, num_tokens, num_heads, head_dim, p))                                                            \
  X(swiglu, (const float* gate, const float* up, float* out, int64_t n), (gate, up, out, n))                       \
  X(geglu, (const float* gate, const float* up, float* out, int64_t n), (gate, up, out, n))                        \
  X(add_bias, (float* x, const float* bias, int64_t num_rows, int64_t dim), (x, bias, num_rows, dim))              \
  X(scale, (float* x, float s, int64_t n), (x, s, n))                                                              \
  X(kv_write, (const KvLayout& layout, DType kv_type, void* k_cache, void* v_cache, const float* k, const float* v, \
               const int32_t* slot_mapping, int64_t num_tokens),                                                   \
    (layout, kv_type, k_cache, v_cache, k, v, slot_mapping, num_tokens))                                           \
  X(paged_attention, (const float* q, const void* k_cache, const void* v_cache, DType kv_type,                     \
                      const KvLayout& layout, const AttentionBatch& batch, int32_t num_heads, float scale,         \
                      float* out),                                                                                 \
    (q, k_cache, v_cache, kv_type, layout, batch, num_heads, scale, out))                                          \
  X(moe_route, (const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k, bool renormalize,     \
                const MoeRouting& out),                                                                            \
    (logits, num_tokens, num_experts, top_k, renormalize, out))                                                    \
  X(scatter_rows, (const float* src, int64_t n, int64_t dim, const int32_t* ids, float* dst),                     \
    (src, n, dim, ids, dst))                                                                                       \
  X(weighted_sum_rows, (const float* rows, const float* weights, int64_t n, int32_t k, int64_t dim, float* out),   \
    (rows, weights, n, k, dim, out))                                                                               \
  X(softmax, (float* x, int64_t num_rows, int64_t n), (x, num_rows, n))

namespace flashserve::kernels {

// Throws std::invalid_argument with a printf-formatted message. Op files build error messages
// through this (compiled once, for plain x86-64) rather than with std::string: the string code they
// would inline is shared across copies, so the linker could keep an AVX-512 build of it for the
// whole program (tests/kernels/check_isa_isolation.sh fails on any such symbol).
[[noreturn]] void throw_invalid_argument(const char* format, ...) __attribute__((format(printf, 1, 2)));

struct CpuOps {
#define FLASHSERVE_OP_FIELD(name, params, args) decltype(&::flashserve::kernels::name) name;
  FLASHSERVE_CPU_OPS(FLASHSERVE_OP_FIELD)
#undef FLASHSERVE_OP_FIELD
};

// The table of one compiled copy (any level, supported here or not: the caller checks).
const CpuOps& cpu_ops(CpuIsa isa);

namespace FLASHSERVE_ISA {
// The same signatures as the public declarations, in this copy's namespace.
#define FLASHSERVE_OP_DECLARE(name, params, args) decltype(::flashserve::kernels::name) name;
FLASHSERVE_CPU_OPS(FLASHSERVE_OP_DECLARE)
#undef FLASHSERVE_OP_DECLARE
extern const CpuOps ops;
}  // namespace FLASHSERVE_ISA

}  // namespace flashserve::kernels
