// Start-up choice of the compiled copy of the CPU ops (kernels/cpu_isa.h), and the public op
// functions, which forward to it. Compiled once, for plain x86-64.
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu_isa.h"

namespace flashserve::kernels {
namespace isa_scalar { extern const CpuOps ops; }
namespace isa_avx2 { extern const CpuOps ops; }
namespace isa_avx2_vnni { extern const CpuOps ops; }
namespace isa_avx512 { extern const CpuOps ops; }
namespace isa_avx512_vnni { extern const CpuOps ops; }
namespace isa_avx512_amx { extern const CpuOps ops; }

const CpuOps& cpu_ops(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return isa_scalar::ops;
    case CpuIsa::Avx2: return isa_avx2::ops;
    case CpuIsa::Avx2Vnni: return isa_avx2_vnni::ops;
    case CpuIsa::Avx512: return isa_avx512::ops;
    case CpuIsa::Avx512Vnni: return isa_avx512_vnni::ops;
    case CpuIsa::Avx512Amx: return isa_avx512_amx::ops;
  }
  return isa_scalar::ops;
}

namespace {

bool bit(unsigned reg, int n) { return (reg >> n) & 1u; }

// Register state the OS saves on a context switch (XCR0): AVX needs XMM and YMM, AVX-512 also the
// opmask and upper ZMM state. A CPU may report AVX-512 that a kernel or hypervisor left disabled.
uint64_t xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

// Linux gives a process the tiles' 8 KB of register state only when asked (arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA, state component 18); until then a tile instruction faults.
bool os_allows_tiles() {
  constexpr int kReqXcompPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
}

// The level in use, read on every op call.
std::atomic<CpuIsa>& active() {
  static std::atomic<CpuIsa> isa{best_cpu_isa()};
  return isa;
}

const CpuOps& ops() { return cpu_ops(active().load(std::memory_order_relaxed)); }

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Scalar: return "scalar";
    case CpuIsa::Avx2: return "avx2";
    case CpuIsa::Avx2Vnni: return "avx2-vnni";
    case CpuIsa::Avx512: return "avx512";
    case CpuIsa::Avx512Vnni: return "avx512-vnni";
    case CpuIsa::Avx512Amx: return "avx512-amx";
  }
  return "?";
}

std::optional<CpuIsa> parse_cpu_isa(std::string_view name) {
  for (CpuIsa isa : kCpuIsas) {
    if (name == cpu_isa_name(isa)) return isa;
  }
  return std::nullopt;
}

CpuFeatures cpu_features() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = bit(c, 27);
  const uint64_t state = osxsave ? xcr0() : 0;
  const bool ymm = (state & 0x6) == 0x6, zmm = (state & 0xe6) == 0xe6;
  f.fma = bit(c, 12) && ymm;
  f.movbe = bit(c, 22);
  f.avx = bit(c, 28) && ymm;
  f.f16c = bit(c, 29) && ymm;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.bmi1 = bit(b, 3);
    f.avx2 = bit(b, 5) && ymm;
    f.bmi2 = bit(b, 8);
    f.avx512f = bit(b, 16) && zmm;
    f.avx512dq = bit(b, 17) && zmm;
    f.avx512cd = bit(b, 28) && zmm;
    f.avx512bw = bit(b, 30) && zmm;
    f.avx512vl = bit(b, 31) && zmm;
    f.avx512vnni = bit(c, 11) && zmm;
    const bool tile_state = (state & 0x60000) == 0x60000;  // XTILECFG and XTILEDATA
    f.amx_int8 = bit(d, 24) && bit(d, 25) && tile_state && os_allows_tiles();
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avxvnni = bit(a, 4) && ymm;
  if (__get_cpuid(0x80000001, &a, &b, &c, &d)) f.lzcnt = bit(c, 5);
  return f;
}

bool cpu_supports(const CpuFeatures& f, CpuIsa isa) {
  const bool v3 = f.avx && f.avx2 && f.fma && f.f16c && f.bmi1 && f.bmi2 && f.lzcnt && f.movbe;
  const bool v4 = v3 && f.avx512f && f.avx512bw && f.avx512cd && f.avx512dq && f.avx512vl;
  switch (isa) {
    case CpuIsa::Scalar: return true;
    case CpuIsa::Avx2: return v3;
    case CpuIsa::Avx2Vnni: return v3 && f.avxvnni;
    case CpuIsa::Avx512: return v4;
    case CpuIsa::Avx512Vnni: return v4 && f.avx512vnni;
    case CpuIsa::Avx512Amx: return v4 && f.avx512vnni && f.amx_int8;
  }
  return false;
}

bool cpu_supports(CpuIsa isa) {
  static const CpuFeatures features = cpu_features();
  return cpu_supports(features, isa);
}

std::vector<CpuIsa> supported_cpu_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : kCpuIsas) {
    if (cpu_supports(isa)) out.push_back(isa);
  }
  return out;
}

CpuIsa best_cpu_isa() { return supported_cpu_isas().back(); }

CpuIsa cpu_isa() { return active().load(); }

void require_cpu_isa(CpuIsa isa) {
  if (!cpu_supports(isa)) {
    throw std::invalid_argument(std::string("this CPU cannot run the ") + cpu_isa_name(isa) +
                                " kernels (best: " + cpu_isa_name(best_cpu_isa()) + ")");
  }
}

void set_cpu_isa(CpuIsa isa) {
  require_cpu_isa(isa);
  active().store(isa);
}

void throw_invalid_argument(const char* format, ...) {
  char message[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  throw std::invalid_argument(message);
}

bool matmul_q8_supports(DType wtype) {
  return wtype != DType::F32 && wtype != DType::F16 && wtype != DType::BF16;
}

void matmul(const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype, int64_t n_out, float* y) {
  ops().matmul(x, num_tokens, k, w, wtype, n_out, y);
}
void matmul_q8(const float* x, int64_t num_tokens, int64_t k, const void* w, DType wtype, int64_t n_out, float* y) {
  ops().matmul_q8(x, num_tokens, k, w, wtype, n_out, y);
}
void matmul_q8_packed(const float* x, int64_t num_tokens, int64_t k, const void* packed, DType wtype, int64_t n_out,
                      float* y) {
  ops().matmul_q8_packed(x, num_tokens, k, packed, wtype, n_out, y);
}
void get_row(const void* w, DType wtype, int64_t k, int64_t row, float* out) { ops().get_row(w, wtype, k, row, out); }
void get_rows(const void* w, DType wtype, int64_t k, const int32_t* ids, int64_t n, float* out) {
  ops().get_rows(w, wtype, k, ids, n, out);
}
void rmsnorm(const float* x, const float* weight, float* y, int64_t num_rows, int64_t dim, float eps) {
  ops().rmsnorm(x, weight, y, num_rows, dim, eps);
}
void add_rmsnorm(float* x, const float* residual, const float* weight, float* y, int64_t num_rows, int64_t dim,
                 float eps) {
  ops().add_rmsnorm(x, residual, weight, y, num_rows, dim, eps);
}
void rope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
          const RopeParams& p) {
  ops().rope(x, positions, num_tokens, num_heads, head_dim, p);
}
void swiglu(const float* gate, const float* up, float* out, int64_t n) { ops().swiglu(gate, up, out, n); }
void geglu(const float* gate, const float* up, float* out, int64_t n) { ops().geglu(gate, up, out, n); }
void add_bias(float* x, const float* bias, int64_t num_rows, int64_t dim) { ops().add_bias(x, bias, num_rows, dim); }
void scale(float* x, float s, int64_t n) { ops().scale(x, s, n); }
void kv_write(const KvLayout& layout, DType kv_type, void* k_cache, void* v_cache, const float* k, const float* v,
              const int32_t* slot_mapping, int64_t num_tokens) {
  ops().kv_write(layout, kv_type, k_cache, v_cache, k, v, slot_mapping, num_tokens);
}
void paged_attention(const float* q, const void* k_cache, const void* v_cache, DType kv_type, const KvLayout& layout,
                     const AttentionBatch& batch, int32_t num_heads, float scale, float* out) {
  ops().paged_attention(q, k_cache, v_cache, kv_type, layout, batch, num_heads, scale, out);
}
void moe_route(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k, bool renormalize,
               const MoeRouting& out) {
  ops().moe_route(logits, num_tokens, num_experts, top_k, renormalize, out);
}
void scatter_rows(const float* src, int64_t n, int64_t dim, const int32_t* ids, float* dst) {
  ops().scatter_rows(src, n, dim, ids, dst);
}
void weighted_sum_rows(const float* rows, const float* weights, int64_t n, int32_t k, int64_t dim, float* out) {
  ops().weighted_sum_rows(rows, weights, n, k, dim, out);
}
void softmax(float* x, int64_t num_rows, int64_t n) { ops().softmax(x, num_rows, n); }

}  // namespace flashserve::kernels
