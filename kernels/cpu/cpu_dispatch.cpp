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
#include <type_traits>

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

#define FLASHSERVE_OP_FORWARD(name, params, args) \
  void name params { ops().name args; }
FLASHSERVE_CPU_OPS(FLASHSERVE_OP_FORWARD)
#undef FLASHSERVE_OP_FORWARD
// A list entry whose parameters differ from its header's would have made an overload instead.
#define FLASHSERVE_OP_SAME(name, params, args) \
  static_assert(std::is_same_v<decltype(&name), decltype(CpuOps::name)>, #name ": the list's parameters are not the header's");
FLASHSERVE_CPU_OPS(FLASHSERVE_OP_SAME)
#undef FLASHSERVE_OP_SAME

}  // namespace flashserve::kernels
