// Which compiled copy of the CPU kernels runs. Each op file is built for several instruction sets;
// the best one this CPU and its OS support (read with cpuid at start-up) is used unless a lower one
// is forced, so one binary runs correctly, and fast, on any x86-64 machine.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

namespace flashserve::kernels {

// In order of preference. A CPU that runs a level runs scalar and avx2, but not always the levels
// between: Cascade Lake has AVX-512 VNNI and no AVX-VNNI, Alder Lake the reverse.
enum class CpuIsa {
  Scalar,      // plain x86-64: portable C++ loops (SSE2 at most, from the compiler)
  Avx2,        // x86-64-v3: AVX2, FMA, F16C, BMI1/2, LZCNT, MOVBE (Haswell, Zen 1 and later)
  Avx2Vnni,    // x86-64-v3 with AVX-VNNI, VNNI on 256-bit vectors (Alder Lake, Zen 5 and later)
  Avx512,      // x86-64-v4: AVX-512 F, BW, CD, DQ, VL (Skylake-SP, Zen 4 and later)
  Avx512Vnni,  // x86-64-v4 with AVX-512 VNNI (Cascade Lake, Ice Lake, Zen 4 and later)
  Avx512Amx,   // that with AMX-INT8 tiles, where the OS lets the process use them (Sapphire Rapids on)
};
inline constexpr CpuIsa kCpuIsas[] = {CpuIsa::Scalar, CpuIsa::Avx2, CpuIsa::Avx2Vnni, CpuIsa::Avx512,
                                      CpuIsa::Avx512Vnni, CpuIsa::Avx512Amx};

// "scalar", "avx2", "avx2-vnni", "avx512", "avx512-vnni", "avx512-amx"
const char* cpu_isa_name(CpuIsa isa);
std::optional<CpuIsa> parse_cpu_isa(std::string_view name);

// What the CPU reports, with the register state the OS saves (XCR0) taken into account.
struct CpuFeatures {
  bool avx = false, avx2 = false, fma = false, f16c = false, bmi1 = false, bmi2 = false, lzcnt = false,
       movbe = false, avxvnni = false;
  bool avx512f = false, avx512bw = false, avx512cd = false, avx512dq = false, avx512vl = false,
       avx512vnni = false;
  bool amx_int8 = false;  // AMX-TILE and AMX-INT8, their state enabled, and this process allowed to use it
};
CpuFeatures cpu_features();
bool cpu_supports(const CpuFeatures& f, CpuIsa isa);
bool cpu_supports(CpuIsa isa);  // this machine
// Throws std::invalid_argument, naming isa and this CPU's best, unless the CPU runs isa.
void require_cpu_isa(CpuIsa isa);
CpuIsa best_cpu_isa();                   // the last of kCpuIsas this CPU runs
std::vector<CpuIsa> supported_cpu_isas();  // in kCpuIsas order

// The copy the public op functions (kernels/matmul.h and the rest) and new CPU backends use; starts
// as best_cpu_isa(). set_cpu_isa throws std::invalid_argument for a level this CPU cannot run; call
// it while no kernel is running.
CpuIsa cpu_isa();
void set_cpu_isa(CpuIsa isa);

}  // namespace flashserve::kernels
